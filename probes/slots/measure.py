"""The slot's measuring stage: its requests through the engine, as its kind sends them.

Under the caps the previous stage took: the kind (probes/kinds/) sends its requests and
the engine measures them, each off the database (a measurement takes seconds to minutes,
and a threads-pool worker's 64 task threads would otherwise hold 64 idle Postgres
connections through them). What it hands on is what was measured, unjudged, and the
exception that cut the group short, if one did (the record stage raises it again once
the measured requests are stored).

A self-hosted endpoint's telemetry window is read here too: which /metrics and power
source to read (the endpoint's fields), and the energy counter's last reading,
remembered between runs so the next run knows the power drawn meanwhile (the idle,
unless others ran). The reading is kept in Redis (per endpoint, an hour): a lost reading
only leaves the next run without its above-idle figures.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import connection

from probes import kinds
from probes.engine import RunResult, measure_all_sync, measure_sync
from probes.engine.telemetry import Telemetry
from probes.kinds import Measured
from probes.platform.redis_client import redis_client
from probes.slots.plan import SlotPlan

log = logging.getLogger(__name__)

_KEY = "inferwatch:energy:last:{}"
_KEEP_S = 3600  # an older reading says nothing about this run's idle


def telemetry_for(endpoint) -> Telemetry | None:
    """What to read around the endpoint's runs; None for an endpoint without telemetry."""
    if not (endpoint.server_metrics_url or endpoint.power_url):
        return None
    return Telemetry(
        server_metrics_url=endpoint.server_metrics_url or None,
        power_url=endpoint.power_url or None,
        power_query=endpoint.power_query or None,
        power_selector=endpoint.power_selector,
        previous_energy=_last_reading(endpoint.pk) if endpoint.power_url else None,
    )


def _last_reading(endpoint_id: int) -> tuple[float, float] | None:
    try:
        raw = redis_client().get(_KEY.format(endpoint_id))
        if raw is None:
            return None
        joules, at_s = json.loads(raw)
        return float(joules), float(at_s)
    except Exception:  # Redis away or an odd value: the run goes on without idle power
        log.warning("No last energy reading for endpoint %s", endpoint_id, exc_info=True)
        return None


def remember_energy(endpoint_id: int, results: list[RunResult]) -> None:
    """Keep the latest energy reading of these runs for the endpoint's next run."""
    readings = [
        (
            r.server_timing["metrics"]["energy"]["after_j"],
            r.server_timing["metrics"]["energy"]["at_s"],
        )
        for r in results
        if (r.server_timing or {}).get("metrics", {}).get("energy")
    ]
    if not readings:
        return
    latest = max(readings, key=lambda reading: reading[1])
    try:
        redis_client().set(_KEY.format(endpoint_id), json.dumps(latest), ex=_KEEP_S)
    except Exception:
        log.warning("Could not keep the energy reading of endpoint %s", endpoint_id, exc_info=True)


@dataclass
class Measurement:
    plan: SlotPlan
    members: list[Measured]  # measured by this attempt, not judged yet
    unsent: Measured | None = None  # nothing may be sent: the one run saying why
    resumed: bool = False  # an earlier attempt began the group: it cannot go on
    error: Exception | None = None  # what cut the group short


def unsent(plan: SlotPlan) -> RunResult:
    """The run of a slot whose configured key cannot be used: nothing is sent (never a
    probe without its key, or with a variable the operator did not allow), and the slot
    still ends as a stored run saying why. `auth_error` is what the provider would have
    answered without the key; no HTTP status marks that it never saw the request."""
    return RunResult(
        status="auth_error",
        error=f"not sent: {plan.problem}",
        api=plan.template.api,
        model=plan.template.model,
        started_at=datetime.now(UTC),
    )


def measure(plan: SlotPlan) -> Measurement:
    """Measure the slot's requests that are not recorded yet."""
    kind, done = plan.kind, plan.done
    # A single request's index is 0; a group's own row (its summary) takes ``size``.
    last = plan.size if kind.group else 0
    if last in done:
        return Measurement(plan, [])  # recorded, summary and all
    if plan.problem:
        # One stored run says why nothing was sent; a group's says it as its summary,
        # so the failure counts where the group would have ranked.
        role = "group" if kind.group else "single"
        return Measurement(plan, [], unsent=Measured(last, role, unsent(plan)))
    if done:
        # A redelivered slot whose group was cut short: its steps cannot be resumed
        # (a loop needs the answers, a parallel batch its partners); judge closes it.
        return Measurement(plan, [], resumed=True)
    telemetry = telemetry_for(plan.probe.endpoint)
    template = plan.template
    if telemetry is not None:
        template = dataclasses.replace(template, telemetry=telemetry)
    requests = kinds.Plan(
        workload=plan.probe.workload,
        template=template,
        seed_of=plan.seed_of,
        measure_one=_off_the_database(measure_sync),
        measure_many=_off_the_database(measure_all_sync),
        cap=plan.cap,
    )
    try:
        kind.requests(requests)
    except Exception as exc:  # the task's soft time limit, a bug: judged, then raised
        return Measurement(plan, requests.measured, error=exc)
    if telemetry is not None:
        remember_energy(plan.probe.endpoint_id, [m.result for m in requests.measured])
    return Measurement(plan, requests.measured)


def _off_the_database(measure_with):
    """``measure_with`` with this thread's database connection closed first (the next
    query opens another). Not inside a transaction, which must keep its connection."""

    def measure_released(arg):
        if not connection.in_atomic_block:
            connection.close()
        return measure_with(arg)

    return measure_released
