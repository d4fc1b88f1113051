"""A slot's reads of the database, as this worker last made them.

A slot taken as Postgres goes away cannot read its probe, its maintenance windows, its
price or the worker's calibration. Retrying until the database answered was no way out:
the task's message expires at the probe's next slot, so an outage as long as the
interval dropped the slot (lost, issue 32 item 8), though nothing but those reads was
missing: the provider answers, the caps live in Redis and the finished run is spooled
(probes/recording/run_spool.py). So each successful read is kept here, per process and
probe, and a slot that meets the database away runs on the last one: the probe as it
was a slot ago (nobody can edit it while the database is away), its windows, price and
calibration. The sweeper closes its ledger row from the run once the spool is written.

A worker reads its region's active probes as it starts (`warm`), so one started just
before an outage has them too.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from django.db import InterfaceError, OperationalError

from probes.models import MaintenanceWindow, Price, Probe, WorkerCalibration

DB_ERRORS = (OperationalError, InterfaceError)
# Older reads are not used: a worker that has not run a probe for this long has no
# business guessing it.
KEPT_FOR_S = 3600.0


@dataclass(frozen=True)
class Reads:
    probe: Probe
    windows: list[MaintenanceWindow]  # the windows that pause its probes
    read_at: float = field(default_factory=time.monotonic)
    planned: bool = False  # price and ceiling read too (plan.plan)
    price: Price | None = None
    ceiling: WorkerCalibration | None = None


_kept: dict[int, Reads] = {}
_lock = threading.Lock()


def keep(probe: Probe, windows: list[MaintenanceWindow]) -> None:
    with _lock:
        _kept[probe.pk] = Reads(probe, windows)


def keep_plan(probe_id: int, price: Price | None, ceiling: WorkerCalibration | None) -> None:
    with _lock:
        if probe_id in _kept:
            _kept[probe_id] = replace(_kept[probe_id], planned=True, price=price, ceiling=ceiling)


def recall(probe_id: int) -> Reads | None:
    """The last reads for the probe, if recent enough to stand in."""
    with _lock:
        reads = _kept.get(probe_id)
    if reads is None or time.monotonic() - reads.read_at > KEPT_FOR_S:
        return None
    return reads


def warm(region: str, worker: str) -> int:
    """Read every active probe of `region` as a slot would (a worker starting): how many."""
    from probes.recording.recorder import latest_calibration
    from probes.scheduling.maintenance import pausing_windows

    ceiling = latest_calibration(worker)
    now = datetime.now(UTC)
    probes = Probe.objects.active().filter(region=region)
    probes = probes.select_related("endpoint__provider", "workload")
    for probe in probes:
        keep(probe, pausing_windows(probe.endpoint))
        keep_plan(probe.pk, probe.endpoint.price_at(now), ceiling)
    return len(probes)
