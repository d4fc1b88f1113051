"""Run one probe slot, one way: plan -> take caps -> measure -> judge -> record.

Plain logic shared by the `run_probe` task, the admin's "Run now" and `manage.py
run_probe`. Each stage is a module entered once, passing a value the next reads (see
probes/slots/__init__.py): this function only names them in order.
"""

from __future__ import annotations

from datetime import datetime

from probes.engine import scrub
from probes.models import Probe
from probes.recording import recorder
from probes.scheduling import caps
from probes.slots import judge, measure, plan, record
from probes.slots.record import SlotOutcome

# Raised before anything is sent (the callers catch them by these names).
BackingOff = caps.BackingOff

__all__ = ["BackingOff", "SlotOutcome", "run_slot"]


def run_slot(
    probe: Probe,
    slot_at: datetime | None,
    worker: str,
    region: str,
    retry_db_for_s: float = recorder.DB_RETRY_FOR_S,
    max_total_s: float | None = None,
    wait: caps.Wait | None = None,
) -> SlotOutcome:
    """Measure and record the slot's requests that are not recorded yet.

    Raises caps.Busy (no free slot under a cap: at once, or after waiting in turn until
    wait.until), caps.Stopped (its worker stopped while it waited), BackingOff (the
    provider asked us to wait) and caps.TooNarrow (a parallel workload needs more than
    the provider's cap) before measuring anything: the slots of the whole group are
    taken before its first request and held to its last record. A group that an
    exception cuts short is recorded with a summary naming it, then the exception is
    raised.
    """
    planned = plan.plan(probe, slot_at, worker, region, retry_db_for_s, max_total_s)
    stages = (measure.measure, judge.judge, record.record)
    # Judging and recording cut provider text (a check's detail): every live secret is
    # scrubbed from it first (probes/engine/scrub.py).
    with scrub.using(recorder.live_scrubber()):
        return caps.hold(
            probe.endpoint.provider, worker, planned.footprint, planned, stages, wait=wait,
            endpoint_id=probe.endpoint_id,
        )  # fmt: skip
