"""The slot's last stage: store what was measured and judged, and say how it went.

Every row goes to the recorder (probes/recording/recorder.py: the database, or the spool when the
database is away), still under the caps; each request is then pushed to the
OpenTelemetry exporter (probes/platform/otel.py). A group cut short by an exception is stored
with its summary, then the exception is raised again for the task to see.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from probes.engine import RunResult
from probes.platform import otel
from probes.recording import recorder as recording
from probes.slots.judge import Judged


@dataclass
class SlotOutcome:
    results: list[RunResult]
    already_recorded: int = 0
    spooled: int = 0
    run_group: uuid.UUID | None = None  # the stored runs' group (ProbeRun.run_group)
    # The provider answered 429: the caps stage backs it off (probes/scheduling/caps.py).
    rate_limited: bool = False
    retry_after_s: float | None = None


def record(judged: Judged) -> SlotOutcome:
    plan = judged.plan
    probe = plan.probe
    endpoint = probe.endpoint
    outcome = SlotOutcome(
        results=judged.results, already_recorded=len(plan.done), run_group=plan.group
    )
    for m in judged.rows:
        ctx = recording.RunContext(
            endpoint_id=endpoint.pk,
            workload_id=probe.workload_id,
            region=plan.region,
            worker=plan.worker,
            probe_id=probe.pk,
            slot_at=plan.slot_at,
            run_group=plan.group,
            request_index=m.index,
            price=plan.price,
            ceiling=plan.ceiling,
            measured=m,
        )
        if recording.record(m.result, ctx, plan.retry_db_for_s) == "spooled":
            outcome.spooled += 1
    target = otel.Target(
        endpoint.provider.slug,
        endpoint.model_id,
        endpoint.provider.base_url,
        probe.workload.slug,
        plan.region,
    )
    for m in judged.rows:
        if m.role != "group":  # a group's summary row is not a request
            otel.export(m.result, target)
    if judged.error is not None:
        raise judged.error
    limited = next((r for r in outcome.results if r.status == "rate_limited"), None)
    if limited is not None:
        outcome.rate_limited, outcome.retry_after_s = True, limited.retry_after_s
    return outcome
