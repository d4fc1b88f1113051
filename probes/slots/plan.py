"""The slot's first stage: from a probe and its slot to what will be sent and held.

Plain reading, nothing sent: which of the slot's requests are recorded already (a
redelivered slot measures only what is not), the run group, the price and the worker's
calibration (read now: recording a finished run must need no query but its INSERT), the
key (a key that cannot be used means nothing is sent), the request template and the
footprint the caps stage takes. Each request's prompt is fresh, generated from a seed
derived from the slot and request index (probes/prompts).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings

from probes import kinds, prompts
from probes.engine import Limits, Prices, ProbeRequest
from probes.engine.telemetry import Telemetry
from probes.kinds.requests import length_fields, prompt_spec, seed_at, seed_for
from probes.models import Price, Probe, ProbeRun, WorkerCalibration
from probes.recording import live_secrets, recorder, standby

# Run groups of scheduled slots are derived from the slot, so a redelivered slot keeps
# the group its first requests were recorded under.
_GROUP_NAMESPACE = uuid.UUID("6f1c3a52-35b4-4c36-9a41-0d6f4e1a2b7c")


@dataclass
class SlotPlan:
    probe: Probe
    slot_at: datetime | None
    worker: str
    region: str
    retry_db_for_s: float
    group: uuid.UUID  # the stored runs' group (ProbeRun.run_group)
    kind: kinds.Kind
    size: int  # requests of a full group (a group's summary takes this index)
    template: ProbeRequest  # every request but its messages and its check's fields
    seed_of: Callable[[int], int]
    cap: int | None  # requests at once the provider takes
    footprint: kinds.Footprint | None  # None: nothing will be sent
    price: Price | None = None
    ceiling: WorkerCalibration | None = None
    problem: str = ""  # why nothing may be sent (the key), else ""
    done: set[int] = field(default_factory=set)  # indexes recorded by an earlier attempt


def plan(
    probe: Probe,
    slot_at: datetime | None,
    worker: str,
    region: str,
    retry_db_for_s: float,
    max_total_s: float | None = None,
) -> SlotPlan:
    endpoint, workload = probe.endpoint, probe.workload
    provider = endpoint.provider
    done: set[int] = set()
    try:
        if slot_at is not None:
            done = set(
                ProbeRun.objects.filter(probe=probe, slot_at=slot_at).values_list(
                    "request_index", flat=True
                )
            )
        price = endpoint.price_at(datetime.now(UTC))
        ceiling = recorder.latest_calibration(worker)
    except standby.DB_ERRORS:
        # Taken as the database went away: this worker's last reads stand in (nothing of
        # the slot is recorded yet, and a row recorded twice is inserted once).
        kept = standby.recall(probe.pk)
        if kept is None or not kept.planned:
            raise
        done, price, ceiling = set(), kept.price, kept.ceiling
    else:
        standby.keep_plan(probe.pk, price, ceiling)
    group = run_group_for(probe.pk, slot_at)
    # Read now, while the database answers (else the last list stands): the recorder
    # scrubs every run with it.
    live_secrets.live_secrets(refresh=True)
    key = provider.resolve_key()
    problem = key.problem or missing_key(provider, key)
    kind = kinds.of(workload)
    cap = provider.max_concurrency
    # Seeds come from the run's identity: fresh per slot, the same on redelivery.
    identity = f"{probe.pk}/{slot_at.isoformat()}" if slot_at else str(group)
    return SlotPlan(
        probe=probe,
        slot_at=slot_at,
        worker=worker,
        region=region,
        retry_db_for_s=retry_db_for_s,
        group=group,
        kind=kind,
        size=kind.size(workload),
        # The kind builds each request's prompt: the template's own is never sent.
        template=build_request(probe, price, key.value, max_total_s, messages=[]),
        seed_of=functools.partial(seed_at, identity),
        cap=cap,
        footprint=None if problem else kind.footprint(workload, cap),
        price=price,
        ceiling=ceiling,
        problem=problem,
        done=done,
    )


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
    messages: list[dict] | None = None,
    telemetry: Telemetry | None = None,
) -> ProbeRequest:
    """The request for one of the probe's runs (``messages`` default to request 0's of
    a manual run): a slot's kind replaces the messages and adds its check's fields."""
    endpoint, workload = probe.endpoint, probe.workload
    provider = endpoint.provider
    if messages is None:
        messages = prompts.build(prompt_spec(workload), seed_for(f"probe/{probe.pk}/manual"))
    body = length_fields(workload, endpoint.length_control, probe.effective_max_tokens)
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
        extra_headers=dict(provider.extra_headers or {}),
        extra_body=body,
        limits=Limits(
            connect_s=provider.connect_timeout_s,
            first_token_s=provider.first_token_timeout_s,
            stall_s=provider.stall_timeout_s,
            total_s=min(provider.total_timeout_s, max_total_s or provider.total_timeout_s),
        ),
        prices=_prices(price),
        min_speed_tokens=settings.MIN_SPEED_TOKENS,
        token_counter=endpoint.token_counter or None,
        telemetry=telemetry,
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
