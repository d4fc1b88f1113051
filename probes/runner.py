"""Run one probe slot: build the request, respect the caps, measure, record.

Plain logic shared by the `run_probe` task and the admin's "Run now". A slot's requests
(several for multi-request workloads) share one run group; a redelivered slot measures
only the requests that are not recorded yet.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings

from probes import concurrency, recording
from probes.engine import Limits, Prices, ProbeRequest, RunResult, measure_sync
from probes.models import Price, Probe, ProbeRun

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


def build_request(
    probe: Probe, price: Price | None, api_key: str | None, max_total_s: float | None = None
) -> ProbeRequest:
    endpoint, workload = probe.endpoint, probe.workload
    provider = endpoint.provider
    prices = None
    if price is not None:
        prices = Prices(
            input_per_m=float(price.input_per_m),
            cached_input_per_m=(
                None if price.cached_input_per_m is None else float(price.cached_input_per_m)
            ),
            output_per_m=float(price.output_per_m),
        )
    return ProbeRequest(
        api=provider.api_style,
        base_url=provider.base_url,
        model=endpoint.model_id,
        api_key=api_key,
        messages=workload.messages,
        max_tokens=probe.effective_max_tokens,
        temperature=workload.temperature,
        extra_headers=dict(provider.extra_headers or {}),
        extra_body=dict(endpoint.extra_body or {}),
        limits=Limits(
            connect_s=provider.connect_timeout_s,
            first_token_s=provider.first_token_timeout_s,
            stall_s=provider.stall_timeout_s,
            total_s=min(provider.total_timeout_s, max_total_s or provider.total_timeout_s),
        ),
        prices=prices,
        min_speed_tokens=settings.MIN_SPEED_TOKENS,
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


def run_group_for(probe_id: int, slot_at: datetime | None) -> uuid.UUID:
    if slot_at is None:
        return uuid.uuid4()
    return uuid.uuid5(_GROUP_NAMESPACE, f"{probe_id}/{slot_at.isoformat()}")


def run_slot(
    probe: Probe,
    slot_at: datetime | None,
    worker: str,
    region: str,
    retry_db_for_s: float = recording.DB_RETRY_FOR_S,
    max_total_s: float | None = None,
) -> SlotOutcome:
    """Measure and record the slot's requests that are not recorded yet.

    Raises concurrency.Busy (no free slot under a cap: try again shortly) and
    BackingOff (the provider asked us to wait) before measuring anything.
    """
    endpoint = probe.endpoint
    provider = endpoint.provider
    until = concurrency.backing_off_until(provider)
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
    key = provider.resolve_key()
    problem = key.problem or missing_key(provider, key)
    for index in range(probe.workload.requests):
        if index in done:
            continue
        price = endpoint.price_at(datetime.now(UTC))
        if problem:
            result = unsent(probe, problem)
        else:
            with concurrency.request_slot(provider, worker):
                result = measure_sync(build_request(probe, price, key.value, max_total_s))
        ctx = recording.RunContext(
            endpoint_id=endpoint.pk,
            workload_id=probe.workload_id,
            region=region,
            worker=worker,
            probe_id=probe.pk,
            slot_at=slot_at,
            run_group=group,
            request_index=index,
            price=price,
            ceiling=ceiling,
        )
        if recording.record(result, ctx, retry_db_for_s) == "spooled":
            outcome.spooled += 1
        outcome.results.append(result)
        if problem:
            break  # one run says why; the slot's other requests would say the same
        if result.status == "rate_limited":
            concurrency.back_off(provider, result.retry_after_s)
            log.info("%s: 429, backing off %s", provider.slug, provider.backoff_until)
            break
    return outcome
