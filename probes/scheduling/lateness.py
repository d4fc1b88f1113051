"""When a slot is too late to run: the rule that keeps schedules from bursting."""

from __future__ import annotations

from datetime import datetime, timedelta

from probes.models import Probe

# A slot runs on time or not at all. One that could only start later than this after its
# time (plus its jitter) is skipped, and the schedule goes on from now: running it late
# would bunch it with the next slot, and after downtime or an interval edit a catch-up
# is a burst of billed, rate-limited requests. Half the interval, at most two minutes,
# never less than two dispatcher ticks (a tick-late claim is normal).
MAX_LATE_S = 120.0


def late_limit(interval_s: int, jitter_s: int = 0, floor_s: float = 0.0) -> timedelta:
    return timedelta(seconds=max(min(interval_s / 2, MAX_LATE_S), floor_s) + jitter_s)


def too_late(probe: Probe, slot_at: datetime, now: datetime, floor_s: float = 0.0) -> bool:
    return now > latest_start(probe, slot_at, floor_s)


def latest_start(probe: Probe, slot_at: datetime, floor_s: float = 0.0) -> datetime:
    """The last moment the slot may start: a slot waiting for a cap waits until then."""
    return slot_at + late_limit(probe.interval_s, probe.jitter_s, floor_s)
