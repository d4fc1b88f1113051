"""From "I have an endpoint" to probes that run: the plan and the one-step creation.

The add-endpoint page (probes/admin/add_endpoint.py) tests the server
(probes/onboarding/connection_check.py), then shows `propose()`'s plan: every standard workload,
marked fitting or not applicable for the server's context and its slots (a parallel
workload wider than the server's concurrency could never run), at a concurrency the
server can take. `create()` makes the provider, the endpoint and its probes in one transaction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils.text import slugify

from probes.catalog import loader
from probes.catalog.workload_suite import BY_SLUG
from probes.models import CanonicalModel, Endpoint, Probe, Provider, Workload, context_fit
from probes.scheduling import capacity, planner

DEFAULT_INTERVAL_S = 300


@dataclass(frozen=True)
class ProposedProbe:
    workload: Workload
    needed_tokens: int  # context the workload's requests need, margin included
    fits_context: bool
    fits_slots: bool = True  # the server takes as many requests at once as it sends

    @property
    def fits(self) -> bool:
        return self.fits_context and self.fits_slots

    @property
    def reason(self) -> str:
        if not self.fits_context:
            return f"needs ~{self.needed_tokens:,} tokens of context"
        if not self.fits_slots:
            n = self.workload.concurrent_requests
            return f"sends {n} requests at once: more than the server's slots"
        return ""


def standard_workloads() -> list[Workload]:
    """The suite's standard workloads (loaded from code if this database has none yet)."""
    loader.load_workloads(loader.LoadReport())
    slugs = [slug for slug, spec in BY_SLUG.items() if not spec.reasoning]
    return list(Workload.objects.filter(slug__in=slugs, enabled=True).order_by("slug"))


def propose(context_tokens: int | None, slots: int | None = None) -> list[ProposedProbe]:
    """One proposal per standard workload, fitting ones first. ``slots``: the requests
    the server takes at once (None: unknown, no verdict)."""
    proposals = []
    for workload in standard_workloads():
        needed = context_fit.tokens_needed(workload)
        fits = context_fit.fits(context_tokens, workload)
        proposals.append(ProposedProbe(workload, needed, fits, workload.fits_concurrency(slots)))
    return sorted(proposals, key=lambda p: (not p.fits, p.workload.slug))


# Words in a served model id that say how it is served, not which model it is.
_QUALIFIERS = re.compile(
    r"-(instruct|chat|it|hf|gguf|awq|gptq|fp8|fp16|bf16|int4|int8|turbo|versatile|latest"
    r"|q\d(-k)?(-[msl])?|q\d-\d)(?=-|$)"
)


def _normalised(name: str) -> str:
    """'meta-llama/Llama-3.1-8B-Instruct-Q4_K_M' → 'llama-3-1-8b'."""
    name = name.lower().rsplit("/", 1)[-1].removesuffix(".gguf")
    name = re.sub(r"[^a-z0-9]+", "-", name).strip("-")
    name = re.sub(r"^meta-(?=llama)", "", name)  # Meta-Llama-3.1-8B is Llama 3.1 8B
    previous = None
    while previous != name:
        previous, name = name, _QUALIFIERS.sub("", name)
    return name


def matching_model(model_id: str) -> CanonicalModel | None:
    """The existing canonical model a served model id names, by a normalised match
    ('llama-3.1-8b-instruct-q4' → Llama 3.1 8B): the most specific name that the id
    equals or starts with. Only an offer: the user's choice on the form is final."""
    wanted = _normalised(model_id)
    if not wanted:
        return None
    best, best_len = None, 0
    for model in CanonicalModel.objects.only("pk", "name", "slug"):
        name = _normalised(model.name)
        if name and (wanted == name or wanted.startswith(name + "-")) and len(name) > best_len:
            best, best_len = model, len(name)
    return best


def provider_name(base_url: str, server_software: str = "") -> str:
    """A name for a new provider: what the server says it is and where it is
    ('vLLM @ 10.0.0.5:8000'); host and port only, never the URL's user or password."""
    parts = urlsplit(base_url)
    host = parts.hostname or base_url
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    where = f"{host}:{port}" if port else host
    return f"{server_software} @ {where}" if server_software else where


def is_local(base_url: str) -> bool:
    """A server on this machine or the private network: keyless by default."""
    host = (urlsplit(base_url).hostname or "").lower()
    return (
        host in ("localhost", "127.0.0.1", "::1")
        or host.endswith(".local")
        or host.startswith(("10.", "192.168.", "172.16.", "127."))
    )


@dataclass
class NewEndpoint:
    provider_name: str
    api_style: str
    base_url: str
    model_id: str
    model_name: str  # the canonical model ("Llama 3.1 8B"); found by name or created
    api_key_env: str = ""
    api_key: str = ""
    context_tokens: int | None = None
    token_counter: str = ""  # connection_check's finding: tokenize.METHODS or ""
    server_metrics_url: str = ""  # connection_check's finding: the server's /metrics
    max_concurrency: int = 1
    interval_s: int = DEFAULT_INTERVAL_S
    workloads: list[Workload] = field(default_factory=list)
    region: str = ""
    output_tps: float | None = None  # the speed the operator expects, if known


@dataclass
class Created:
    provider: Provider
    endpoint: Endpoint
    probes: list[Probe]
    not_applicable: list[ProposedProbe]


def _unique_slug(name: str) -> str:
    base = slugify(name) or "provider"
    slug, n = base, 2
    while Provider.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return slug


def _canonical(name: str) -> CanonicalModel:
    found = CanonicalModel.objects.filter(name__iexact=name).first()
    if found:
        return found
    base = slugify(name.replace(".", "-")) or "model"
    slug, n = base, 2
    while CanonicalModel.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return CanonicalModel.objects.create(name=name, slug=slug)


@transaction.atomic
def create(spec: NewEndpoint) -> Created:
    """Provider (enabled), endpoint and one probe per chosen workload that fits; chosen
    workloads that do not fit are returned as not applicable, never created."""
    provider = Provider(
        name=spec.provider_name,
        slug=_unique_slug(spec.provider_name),
        api_style=spec.api_style,
        base_url=spec.base_url,
        api_key_env=spec.api_key_env,
        # A keyless local server needs no key; anything given a key requires it.
        requires_key=bool(spec.api_key or spec.api_key_env),
        max_concurrency=spec.max_concurrency,
        enabled=True,
    )
    provider.set_api_key(spec.api_key)
    provider.full_clean()
    provider.save()
    endpoint = Endpoint.objects.create(
        provider=provider,
        model_id=spec.model_id,
        canonical_model=_canonical(spec.model_name),
        context_tokens=spec.context_tokens,
        token_counter=spec.token_counter,
        server_metrics_url=spec.server_metrics_url,
    )
    probes, skipped = [], []
    region = spec.region or settings.PROBE_REGION
    for proposal in propose(spec.context_tokens, spec.max_concurrency):
        if proposal.workload not in spec.workloads:
            continue
        if not proposal.fits:
            skipped.append(proposal)
            continue
        probes.append(
            Probe.objects.create(
                endpoint=endpoint,
                workload=proposal.workload,
                region=region,
                interval_s=spec.interval_s,
                jitter_s=min(10, spec.interval_s // 6),
            )
        )
    # Not all due at once: a one-slot server would skip most of them (the planner).
    capacity.replan(probes, given_tps=spec.output_tps)
    return Created(provider, endpoint, probes, skipped)


@dataclass(frozen=True)
class CapacityProposal:
    """What the chosen probes would need of the server's slots, before any is created."""

    probes: int
    need_s: float  # slot-seconds per interval, all probes together
    interval_s: int
    slots: int
    output_tps: float
    speed_given: bool

    @property
    def share(self) -> float:
        return self.need_s / (self.slots * self.interval_s)

    @property
    def fits(self) -> bool:
        return self.share <= planner.WARN_SHARE

    @property
    def fitting_interval_s(self) -> int | None:
        return planner.fitting_interval(self.need_s, self.slots, self.interval_s)

    @property
    def text(self) -> str:
        slots = "your one slot" if self.slots == 1 else f"your {self.slots} slots"
        line = (
            f"These {self.probes} probes need ~{self.need_s:,.0f} s of every "
            f"{self.interval_s:,} s of {slots}: {self.share:.0%}."
        )
        if not self.fits:
            better = self.fitting_interval_s
            if better:
                share = self.need_s / (self.slots * better)
                line += f" Too tight to start on time: every {better:,} s they need {share:.0%}."
            else:
                line += " Even hourly they would not fit: choose fewer workloads."
        speed = "as you gave it" if self.speed_given else "assumed until measured"
        return f"{line} (Estimated at {self.output_tps:,.0f} tok/s, {speed}.)"


def capacity_proposal(
    workloads: list[Workload], slots: int | None, interval_s: int, output_tps: float | None
) -> CapacityProposal | None:
    if not workloads or not interval_s:
        return None
    speed = capacity.Speed(output_tps or planner.ASSUMED_OUTPUT_TPS)
    need = sum(capacity.estimate(w, speed) * w.concurrent_requests for w in workloads)
    return CapacityProposal(
        len(workloads), need, interval_s, slots or 1, speed.output_tps, bool(output_tps)
    )
