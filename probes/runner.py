"""Run one probe slot: build the requests, respect the caps, measure, record.

Plain logic shared by the `run_probe` task and the admin's "Run now". A slot's requests
(several for multi-request workloads: probes/groups.py) share one run group; a
redelivered slot measures only what is not recorded yet. Each request's prompt is fresh,
generated from a seed derived from the slot and request index (probes/prompts).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection

from probes import groups, prompts, selfhosted, workloads
from probes.engine import (
    Limits,
    Prices,
    ProbeRequest,
    RunResult,
    measure_all_sync,
    measure_sync,
)
from probes.engine.telemetry import Telemetry
from probes.models import Price, Probe, ProbeRun
from probes.platform import otel
from probes.recording import live_secrets
from probes.recording import recorder as recording
from probes.scheduling import caps

log = logging.getLogger(__name__)

# Run groups of scheduled slots are derived from the slot, so a redelivered slot keeps
# the group its first requests were recorded under.
_GROUP_NAMESPACE = uuid.UUID("6f1c3a52-35b4-4c36-9a41-0d6f4e1a2b7c")


class BackingOff(Exception):
    def __init__(self, until: datetime) -> None:
        super().__init__(f"provider backing off until {until.isoformat()}")
        self.until = until


@dataclass
class SlotOutcome:
    results: list[RunResult]
    already_recorded: int = 0
    spooled: int = 0
    run_group: uuid.UUID | None = None  # the stored runs' group (ProbeRun.run_group)


def _prices(price: Price | None) -> Prices | None:
    if price is None:
        return None
    return Prices(
        input_per_m=float(price.input_per_m),
        cached_input_per_m=(
            None if price.cached_input_per_m is None else float(price.cached_input_per_m)
        ),
        output_per_m=float(price.output_per_m),
    )


def build_request(
    probe: Probe,
    price: Price | None,
    api_key: str | None,
    max_total_s: float | None = None,
    messages: list[dict[str, Any]] | None = None,
    extra_body: dict[str, Any] | None = None,
    extra_headers: dict[str, str] | None = None,
    include_text: bool = False,
    telemetry: Telemetry | None = None,
) -> ProbeRequest:
    """The request for one of the probe's runs; ``messages`` default to request 0's."""
    endpoint, workload = probe.endpoint, probe.workload
    provider = endpoint.provider
    if messages is None:
        spec = workloads.prompt_spec(workload)
        messages = prompts.build(spec, workloads.seed_for(f"probe/{probe.pk}/manual"))
    body = dict(extra_body or {})
    body.update(
        workloads.length_fields(workload, endpoint.length_control, probe.effective_max_tokens)
    )
    body.update(endpoint.extra_body or {})  # the operator's settings win
    return ProbeRequest(
        api=provider.api_style,
        base_url=provider.base_url,
        model=endpoint.model_id,
        api_key=api_key,
        key_origin=provider.key_origin,  # the door sends the key there and nowhere else
        messages=messages,
        max_tokens=probe.effective_max_tokens,
        temperature=workload.temperature,
        extra_headers={**(extra_headers or {}), **(provider.extra_headers or {})},
        extra_body=body,
        limits=Limits(
            connect_s=provider.connect_timeout_s,
            first_token_s=provider.first_token_timeout_s,
            stall_s=provider.stall_timeout_s,
            total_s=min(provider.total_timeout_s, max_total_s or provider.total_timeout_s),
        ),
        prices=_prices(price),
        min_speed_tokens=settings.MIN_SPEED_TOKENS,
        include_text=include_text,
        token_counter=endpoint.token_counter or None,
        telemetry=telemetry,
    )


def unsent(probe: Probe, problem: str) -> RunResult:
    """The run of a slot whose configured key cannot be used: nothing is sent (never a
    probe without its key, or with a variable the operator did not allow), and the slot
    still ends as a stored run saying why. `auth_error` is what the provider would have
    answered without the key; no HTTP status marks that it never saw the request."""
    return RunResult(
        status="auth_error",
        error=f"not sent: {problem}",
        api=probe.endpoint.provider.api_style,
        model=probe.endpoint.model_id,
        started_at=datetime.now(UTC),
    )


def missing_key(provider, key) -> str:
    """Why a provider that needs a key has none: `run_probe` or *Run now* on a catalog
    provider nobody gave a key would otherwise send an anonymous request to a real API."""
    if key.value or not provider.requires_key:
        return ""
    where = f"set {provider.api_key_env} or " if provider.api_key_env else ""
    return f"no API key ({where}store one in the admin)"


def _off_the_database(measure):
    """``measure`` with this thread's database connection closed first (the next query
    opens another): a measurement takes seconds to minutes, and a threads-pool worker's
    64 task threads would otherwise hold 64 idle Postgres connections through them. Not
    inside a transaction, which must keep its connection."""

    def measure_released(arg):
        if not connection.in_atomic_block:
            connection.close()
        return measure(arg)

    return measure_released


def run_group_for(probe_id: int, slot_at: datetime | None) -> uuid.UUID:
    if slot_at is None:
        return uuid.uuid4()
    return uuid.uuid5(_GROUP_NAMESPACE, f"{probe_id}/{slot_at.isoformat()}")


def _close_cut_short(workload, done: set[int], recorded: list[int], exc: Exception, sink) -> None:
    """A group an exception stopped after its first requests (the task's soft time limit,
    a bug) gets its summary now, naming the cause: a retry could not resume it."""
    size = groups.group_size(workload)
    if workload.kind == "single" or not recorded or size in recorded:
        return
    count = len(done | set(recorded))
    why = f"stopped after {count} of its {size} requests by {type(exc).__name__}: {exc}"
    try:
        sink(groups.interrupted(workload, size, count, why))
    except Exception:  # the original exception is what the caller must see
        log.exception("Could not close a group cut short (%s); a redelivery will", why)


def run_slot(
    probe: Probe,
    slot_at: datetime | None,
    worker: str,
    region: str,
    retry_db_for_s: float = recording.DB_RETRY_FOR_S,
    max_total_s: float | None = None,
    wait: caps.Wait | None = None,
) -> SlotOutcome:
    """Measure and record the slot's requests that are not recorded yet.

    Raises caps.Busy (no free slot under a cap: at once, or after waiting in turn until
    wait.until), caps.Stopped (its worker stopped while it waited),
    BackingOff (the provider asked us to wait) and caps.TooNarrow (a parallel
    workload needs more than the provider's cap) before measuring anything: the slots
    of the whole group are taken before its first request and held to its last. A
    group that an exception cuts short is closed with a summary naming it.
    """
    endpoint = probe.endpoint
    provider = endpoint.provider
    until = caps.backing_off_until(provider)
    if until:
        raise BackingOff(until)
    done: set[int] = set()
    if slot_at is not None:
        done = set(
            ProbeRun.objects.filter(probe=probe, slot_at=slot_at).values_list(
                "request_index", flat=True
            )
        )
    group = run_group_for(probe.pk, slot_at)
    outcome = SlotOutcome(results=[], already_recorded=len(done), run_group=group)
    ceiling = recording.latest_calibration(worker)
    # Read now, while the database answers: the recorder scrubs every run with it.
    live_secrets.live_secrets(refresh=True)
    price = endpoint.price_at(datetime.now(UTC))
    # Seeds come from the run's identity: fresh per slot, the same on redelivery.
    identity = f"{probe.pk}/{slot_at.isoformat()}" if slot_at else str(group)
    key = provider.resolve_key()
    problem = key.problem or missing_key(provider, key)

    server_telemetry = selfhosted.telemetry_for(endpoint)

    def new_request(messages, body, headers, include_text) -> ProbeRequest:
        return build_request(
            probe,
            price,
            key.value,
            max_total_s,
            messages,
            body,
            headers,
            include_text,
            server_telemetry,
        )

    recorded: list[int] = []  # indexes sunk by this attempt
    target = otel.Target(
        provider.slug, endpoint.model_id, provider.base_url, probe.workload.slug, region
    )

    def sink(m: groups.Measured) -> None:
        ctx = recording.RunContext(
            endpoint_id=endpoint.pk,
            workload_id=probe.workload_id,
            region=region,
            worker=worker,
            probe_id=probe.pk,
            slot_at=slot_at,
            run_group=group,
            request_index=m.index,
            price=price,
            ceiling=ceiling,
            measured=m,
        )
        if recording.record(m.result, ctx, retry_db_for_s) == "spooled":
            outcome.spooled += 1
        if m.role != "group":  # a group's summary row is not a request
            otel.export(m.result, target)
            outcome.results.append(m.result)
        recorded.append(m.index)

    if problem:
        # One stored run says why nothing was sent; a group's says it as its summary,
        # so the failure counts where the group would have ranked.
        single = probe.workload.kind == "single"
        index = 0 if single else groups.group_size(probe.workload)
        if index not in done:
            measured = groups.Measured(
                index, "single" if single else "group", unsent(probe, problem)
            )
            sink(measured)
            if not single:  # sink lists requests only; here the summary is the run
                outcome.results.append(measured.result)
        return outcome
    width, rounds = groups.footprint(probe.workload, provider.max_concurrency)
    with caps.probe_slots(provider, worker, width, rounds, wait=wait):  # Busy: nothing sent
        try:
            groups.run(
                groups.Plan(
                    workload=probe.workload,
                    api=provider.api_style,
                    new_request=new_request,
                    seed_of=lambda index: workloads.seed_for(f"{identity}/{index}"),
                    measure_one=_off_the_database(measure_sync),
                    measure_many=_off_the_database(measure_all_sync),
                    sink=sink,
                    done=done,
                    cap=provider.max_concurrency,
                )
            )
        except Exception as exc:
            _close_cut_short(probe.workload, done, recorded, exc, sink)
            raise
    if server_telemetry is not None:
        selfhosted.remember_energy(endpoint.pk, outcome.results)
    limited = next((r for r in outcome.results if r.status == "rate_limited"), None)
    if limited is not None:
        caps.back_off(provider, limited.retry_after_s)
        log.info("%s: 429, backing off %s", provider.slug, provider.backoff_until)
    return outcome
