"""Loads the seed catalog (probes/catalog/seeds.py) and the demo providers.

Loading is idempotent and never undoes an operator's edits. Every row the catalog adds
has a stable key (`provider:groq`, `endpoint:groq/llama-3.3-70b-versatile`, …), kept on the
row (`catalog_key`) and in the CatalogRecord ledger of everything it ever added. A reload
adds only keys it never added before: a row the operator renamed is found by its key and
left as it is, a row the operator deleted stays deleted (the report says what it skipped).
Prices are history: a seed price with a new effective date adds a row, an existing row is
never rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from django.db import transaction
from django.utils.text import slugify

from probes.catalog.seeds import (
    CATALOG_AS_OF,
    DEMO_CLAIM_SOURCE,
    DEMO_COSTLY_INTERVAL_S,
    DEMO_INTERVAL_S,
    DEMO_JITTER_S,
    DEMO_MAX_CONCURRENCY,
    DEMO_MODEL,
    DEMO_PROVIDERS,
    MODELS,
    PROVIDERS,
    SEED_INTERVAL_OVERRIDES_S,
    SEED_INTERVAL_S,
    ClaimSeed,
    Seed,
)
from probes.catalog.workload_suite import LEGACY_MARK, WORKLOADS
from probes.models import (
    CanonicalModel,
    CatalogRecord,
    Claim,
    Endpoint,
    Price,
    Probe,
    Provider,
    Workload,
)
from probes.scheduling import capacity
from probes.simulator.profiles import BUILTIN, Profile


@dataclass
class LoadReport:
    created: dict[str, int] = field(default_factory=dict)
    # Keys the catalog added once and the operator deleted since: not re-created.
    skipped: list[str] = field(default_factory=list)
    # Probes added or rescheduled: the capacity planner gives them their first starts.
    to_plan: list[Probe] = field(default_factory=list)

    def add(self, kind: str, created: bool) -> None:
        self.created[kind] = self.created.get(kind, 0) + int(created)

    def plan(self) -> None:
        """Spread the probes this load added across their intervals, apart from the
        probes they share a cap with (probes/scheduling/planner.py)."""
        capacity.replan(self.to_plan)
        self.to_plan = []

    def __bool__(self) -> bool:
        return any(self.created.values())

    def __str__(self) -> str:
        return ", ".join(f"{n} new {kind}" for kind, n in self.created.items() if n)

    def skipped_summary(self) -> str:
        if not self.skipped:
            return ""
        shown = ", ".join(self.skipped[:10]) + (" …" if len(self.skipped) > 10 else "")
        return f"skipped {len(self.skipped)} row(s) you deleted: {shown}"


def _keyed(model, key: str, natural: dict, defaults: dict, kind: str, report: LoadReport):
    """The catalog's row for `key`, or None when the operator deleted it.

    Found by the key it carries (whatever was renamed since); a row from before keys is
    adopted by its natural key; created only if the catalog never added `key`.
    """
    row = model.objects.filter(catalog_key=key).first()
    if row is not None:
        return row
    if CatalogRecord.objects.filter(key=key).exists():
        report.skipped.append(key)
        return None
    row = model.objects.filter(**natural).first()
    if row is None:
        row = model.objects.create(**natural, **defaults, catalog_key=key)
        report.add(kind, True)
    elif not row.catalog_key:
        row.catalog_key = key
        row.save(update_fields=["catalog_key"])
    CatalogRecord.objects.create(key=key)
    return row


def _recorded(key: str, find, create, kind: str, report: LoadReport) -> None:
    """A keyless row (a price, a claim) the catalog adds once: never again once deleted."""
    exists = find().exists()
    if CatalogRecord.objects.filter(key=key).exists():
        if not exists:
            report.skipped.append(key)
        return
    if not exists:
        create()
        report.add(kind, True)
    CatalogRecord.objects.create(key=key)


def load_workloads(report: LoadReport) -> list[Workload]:
    """The suite from probes/catalog/workload_suite.py, added where missing; rows the admin edited
    are kept as they are (like providers and probes).

    Returns the standard workloads every endpoint is probed with: all but the reasoning
    one, whose long thinking budget only suits reasoning models (add its probes by hand).
    """
    standard = []
    for spec in WORKLOADS:
        workload, created = Workload.objects.get_or_create(
            slug=spec.slug, defaults=spec.row_fields()
        )
        if not created and (workload.params or {}).get(LEGACY_MARK):
            # A row from before generated prompts (migration 0005): now the suite's.
            for name, value in spec.row_fields().items():
                setattr(workload, name, value)
            workload.save()
        report.add("workloads", created)
        if not spec.reasoning:
            standard.append(workload)
    return standard


def _canonical(name: str, report: LoadReport) -> CanonicalModel:
    spec = next(m for m in MODELS if m.name == name)
    model, created = CanonicalModel.objects.get_or_create(
        slug=slugify(name.replace(".", "-")),
        defaults={
            "name": spec.name,
            "family": spec.family,
            "parameters_b": Decimal(spec.parameters_b) if spec.parameters_b else None,
            "open_weights": spec.open_weights,
        },
    )
    report.add("models", created)
    return model


def _endpoint(
    provider: Provider, seed: Seed, source_url: str, report: LoadReport
) -> Endpoint | None:
    key = f"endpoint:{provider.catalog_key.partition(':')[2]}/{seed.model_id}"
    endpoint = _keyed(
        Endpoint,
        key,
        {"provider": provider, "model_id": seed.model_id},
        {"canonical_model": _canonical(seed.model, report)},
        "endpoints",
        report,
    )
    if endpoint is not None and seed.input_per_m is not None:
        _recorded(
            f"price:{key.partition(':')[2]}/{CATALOG_AS_OF}",
            lambda: Price.objects.filter(endpoint=endpoint, effective_from=CATALOG_AS_OF),
            lambda: Price.objects.create(
                endpoint=endpoint,
                effective_from=CATALOG_AS_OF,
                input_per_m=Decimal(seed.input_per_m),
                output_per_m=Decimal(seed.output_per_m),
                cached_input_per_m=Decimal(seed.cached_input_per_m)
                if seed.cached_input_per_m
                else None,
                source_url=source_url,
            ),
            "prices",
            report,
        )
    return endpoint


def _probes(
    endpoint: Endpoint,
    workloads: list[Workload],
    region: str,
    report: LoadReport,
    interval_s: int | None = None,
    jitter_s: int | None = None,
) -> None:
    """One probe per workload; `interval_s` None means the seed intervals, `jitter_s`
    None the seeds' (a demo probe's follows the code, and is planned again when it changes).

    A parallel workload is left out where the provider's cap is below its N (it could
    never run: raise the cap in the admin, then add the probe or reload the catalog).
    """
    cap = endpoint.provider.max_concurrency
    for workload in workloads:
        if not workload.fits_concurrency(cap):
            continue
        every = interval_s or SEED_INTERVAL_OVERRIDES_S.get(workload.slug, SEED_INTERVAL_S)
        if interval_s and workload.slug in SEED_INTERVAL_OVERRIDES_S:
            every = max(interval_s, DEMO_COSTLY_INTERVAL_S)
        key = f"probe:{endpoint.catalog_key.partition(':')[2]}/{workload.slug}/{region}"
        added = report.created.get("probes", 0)
        probe = _keyed(
            Probe,
            key,
            {"endpoint": endpoint, "workload": workload, "region": region},
            {
                "interval_s": every,
                "jitter_s": min(10, every // 6) if jitter_s is None else jitter_s,
            },
            "probes",
            report,
        )
        # New probes are not all due at once: the planner spreads them (report.plan()).
        if report.created.get("probes", 0) > added:
            report.to_plan.append(probe)
        elif probe is not None and jitter_s is not None and probe.jitter_s != jitter_s:
            probe.jitter_s = jitter_s
            probe.save(update_fields=["jitter_s"])
            report.to_plan.append(probe)


def _claim(provider: Provider, seed: ClaimSeed, report: LoadReport) -> None:
    model = _canonical(seed.model, report)
    natural = {
        "provider": provider,
        "canonical_model": model,
        "metric": seed.metric,
        "source_title": seed.source_title,
        # A use-case figure is shown only on its workload's leaderboard.
        "workload": Workload.objects.get(slug=seed.workload) if seed.workload else None,
    }
    _recorded(
        f"claim:{provider.catalog_key.partition(':')[2]}/{model.slug}/{seed.metric}/"
        f"{seed.source_title}"[:200],
        lambda: Claim.objects.filter(**natural),
        lambda: Claim.objects.create(
            **natural,
            value=seed.value,
            value_high=seed.value_high,
            source_url=seed.source_url,
            published_on=seed.published_on,
            notes=seed.notes,
        ),
        "claims",
        report,
    )


@transaction.atomic
def load_catalog(region: str) -> LoadReport:
    """Load models, workloads, the seed providers (disabled until a key is set), their
    endpoints, prices, claims and one probe per endpoint × standard workload in `region`."""
    report = LoadReport()
    workloads = load_workloads(report)
    for seed in PROVIDERS:
        slug = slugify(seed.name)
        provider = _keyed(
            Provider,
            f"provider:{slug}",
            {"slug": slug},
            {
                "name": seed.name,
                "api_style": seed.api_style,
                "base_url": seed.base_url,
                "api_key_env": seed.api_key_env,
                "requires_key": seed.requires_key,
                "extra_headers": seed.extra_headers,
                "max_concurrency": seed.max_concurrency,
                "website": seed.website,
                "notes": seed.notes,
                "enabled": False,
            },
            "providers",
            report,
        )
        if provider is None:
            continue  # deleted by the operator: so are its endpoints, probes and claims
        for endpoint_seed in seed.endpoints:
            endpoint = _endpoint(provider, endpoint_seed, seed.pricing_url, report)
            if endpoint is not None:
                _probes(endpoint, workloads, region, report)
        for claim_seed in seed.claims:
            _claim(provider, claim_seed, report)
    report.plan()
    return report


# What other apps add to the demo (register_demo_extra): the alerts app its rule. probes
# cannot import them, so they register here, as catalog file sections do.
_DEMO_EXTRAS: list[Callable[[LoadReport], None]] = []


def register_demo_extra(load: Callable[[LoadReport], None]) -> None:
    if load not in _DEMO_EXTRAS:
        _DEMO_EXTRAS.append(load)


@transaction.atomic
def load_demo(region: str, simulator_url: str) -> LoadReport:
    """Simulated providers served by our own simulator, enabled, probed every minute.

    The demo rows belong to the code, not the operator: their names, notes, base URL and
    claimed speeds follow the seeds and the simulator on every load.
    """
    report = LoadReport()
    workloads = load_workloads(report)
    base_url = simulator_url.rstrip("/") + "/v1"
    for seed in DEMO_PROVIDERS:
        notes = f"{seed.notes} Served by Inferwatch's simulator; not a real vendor."
        provider = _keyed(
            Provider,
            f"provider:{seed.slug}",
            {"slug": seed.slug},
            {
                "name": seed.name,
                "base_url": base_url,
                "requires_key": False,
                "simulated": True,
                "enabled": True,
                "max_concurrency": DEMO_MAX_CONCURRENCY,
                "notes": notes,
            },
            "providers",
            report,
        )
        if provider is None:
            continue
        wanted = {
            "name": seed.name,
            "base_url": base_url,
            "notes": notes,
            "simulated": True,
            "max_concurrency": max(provider.max_concurrency, DEMO_MAX_CONCURRENCY),
        }
        stale = [name for name, value in wanted.items() if getattr(provider, name) != value]
        if stale:
            for name in stale:
                setattr(provider, name, wanted[name])
            provider.save(update_fields=[*stale, "updated"])
        endpoint_seed = Seed(
            seed.profile, DEMO_MODEL, seed.input_per_m, seed.output_per_m, seed.cached_input_per_m
        )
        endpoint = _endpoint(provider, endpoint_seed, "", report)
        if endpoint is None:
            continue
        _probes(endpoint, workloads, region, report, DEMO_INTERVAL_S, DEMO_JITTER_S)
        _demo_claim(endpoint, BUILTIN[seed.profile], report)
    for extra in _DEMO_EXTRAS:
        extra(report)
    # After the claims: a new demo probe's busy time is estimated from its claimed speed.
    report.plan()
    return report


def _demo_claim(endpoint: Endpoint, profile: Profile, report: LoadReport) -> None:
    """The profile's configured speed as the endpoint's claim: the demo's claimed-vs-measured
    column then shows how close the engine gets to a known truth."""
    _, created = Claim.objects.update_or_create(
        endpoint=endpoint,
        metric="output_tps",
        source_title=DEMO_CLAIM_SOURCE,
        defaults={
            "value": profile.tps,
            "notes": f"The simulator's {profile.name} profile streams at this rate.",
        },
    )
    report.add("claims", created)
