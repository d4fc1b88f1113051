"""Raw-run retention: delete ProbeRun rows older than RAW_RUN_RETENTION_DAYS, in batches.

Each batch is a short transaction deleting a few thousand rows by primary key, so no
long lock is ever held and the probes keep writing meanwhile. The cutoff is a day
boundary: raw runs always start at a whole day, which is what the rollup rebuild relies
on (it never recomputes a bucket whose raw runs are gone). Interrupting is harmless;
running again continues.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction

from probes.timefloors import floor_day

BATCH = 5000


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


def delete_before(
    table: str,
    column: str,
    before: datetime,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
    max_batches: int | None = None,
) -> int:
    """Delete `table`'s rows whose indexed `column` is before `before`, batch by batch."""
    deleted = 0
    batches = 0
    while max_batches is None or batches < max_batches:
        with transaction.atomic(), connection.cursor() as cursor:
            # Oldest first through the column's index; SKIP LOCKED so a batch never
            # waits on a row some other transaction holds.
            cursor.execute(
                f"""
                DELETE FROM {table} WHERE id IN (
                    SELECT id FROM {table} WHERE {column} < %s
                     ORDER BY {column} LIMIT %s FOR UPDATE SKIP LOCKED)
                """,  # table and column are constants of the callers, never input
                [before, batch],
            )
            count = cursor.rowcount
        deleted += count
        batches += 1
        if progress:
            progress(deleted)
        if count < batch:
            break
    return deleted
