"""Raw-run retention: delete ProbeRun rows older than RAW_RUN_RETENTION_DAYS, in batches
(probes/platform/pruning.py: short transactions, no long lock, probes keep writing).

The cutoff is a day boundary: raw runs always start at a whole day, which is what the
rollup rebuild relies on (it never recomputes a bucket whose raw runs are gone).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.conf import settings

from probes.platform.pruning import BATCH, delete_before
from probes.platform.timefloors import floor_day


def cutoff(now: datetime | None = None, days: int | None = None) -> datetime:
    days = settings.RAW_RUN_RETENTION_DAYS if days is None else days
    return floor_day((now or datetime.now(UTC)) - timedelta(days=days))


def prune(
    before: datetime,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
    max_batches: int | None = None,
) -> int:
    """Delete raw runs started before `before`; returns how many were deleted."""
    return delete_before("probes_proberun", "started_at", before, batch, progress, max_batches)
