"""The seed catalog: real providers with their public base URLs, model ids, list prices and
published speed claims, plus the simulated demo providers.

Loading is idempotent and never undoes an operator's edits. Every row the catalog adds
has a stable key (`provider:groq`, `endpoint:groq/llama-3.3-70b-versatile`, …), kept on the
row (`catalog_key`) and in the CatalogRecord ledger of everything it ever added. A reload
adds only keys it never added before: a row the operator renamed is found by its key and
left as it is, a row the operator deleted stays deleted (the report says what it skipped).
Prices are history: a seed price with a new effective date adds a row, an existing row is
never rewritten.

Prices and model ids are the providers' public list figures AS OF `CATALOG_AS_OF`; check
each provider's pricing page (the `source_url`) before relying on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from django.db import transaction
from django.utils.text import slugify

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
from probes.simulator.profiles import BUILTIN, Profile
from probes.workloads import LEGACY_MARK, WORKLOADS

CATALOG_AS_OF = date(2025, 6, 1)

# Real providers are probed every 15 minutes: enough for a history, cheap on credits;
# the workloads that cost several times the others (10,000-token prompts, 2,000-token
# answers, loops and parallel groups) hourly.
SEED_INTERVAL_S = 900
SEED_INTERVAL_OVERRIDES_S = {
    "long-10k": 3600,
    "cached-10k": 3600,
    "code-refactor": 3600,
    "agent-loop": 3600,
    "parallel-8": 3600,
}
# Demo providers fill the pages quickly; their costly workloads (10,000-token prompts,
# loops, parallel groups) every five minutes.
DEMO_INTERVAL_S = 60
DEMO_COSTLY_INTERVAL_S = 300
# Demo providers take 8 concurrent requests, so parallel-8 runs on them.
DEMO_MAX_CONCURRENCY = 8


@dataclass(frozen=True)
class Model:
    name: str
    family: str
    parameters_b: str | None = None
    open_weights: bool = True


@dataclass(frozen=True)
class Seed:
    """One endpoint: the provider's model id, its canonical model and its list price."""

    model_id: str
    model: str
    input_per_m: str | None = None
    output_per_m: str | None = None
    cached_input_per_m: str | None = None


@dataclass(frozen=True)
class ClaimSeed:
    model: str
    metric: str
    value: float
    source_title: str
    source_url: str
    published_on: date | None = None
    value_high: float | None = None
    notes: str = ""
    workload: str | None = None  # the use case the figure is about (a workload slug)


@dataclass(frozen=True)
class ProviderSeed:
    name: str
    base_url: str
    api_key_env: str = ""
    api_style: str = "openai-chat"
    website: str = ""
    pricing_url: str = ""
    requires_key: bool = True
    extra_headers: dict = field(default_factory=dict)
    notes: str = ""
    endpoints: tuple[Seed, ...] = ()
    claims: tuple[ClaimSeed, ...] = ()
    max_concurrency: int = 2


MODELS = [
    Model("Llama 3.3 70B", "Llama", "70"),
    Model("Llama 3.1 405B", "Llama", "405"),
    Model("Llama 3.1 8B", "Llama", "8"),
    Model("Llama 4 Scout", "Llama", "109"),
    Model("Qwen3 32B", "Qwen", "32"),
    Model("DeepSeek V3", "DeepSeek", "671"),
    Model("GPT-4o", "GPT", open_weights=False),
    Model("GPT-4o mini", "GPT", open_weights=False),
    Model("GPT-4.1", "GPT", open_weights=False),
    Model("GPT-4.1 mini", "GPT", open_weights=False),
    Model("Claude Sonnet 4", "Claude", open_weights=False),
    Model("Claude 3.5 Haiku", "Claude", open_weights=False),
]

PROVIDERS = [
    ProviderSeed(
        "Cerebras",
        "https://api.cerebras.ai/v1",
        "CEREBRAS_API_KEY",
        website="https://www.cerebras.ai/inference",
        pricing_url="https://www.cerebras.ai/pricing",
        notes="Wafer-scale engine (WSE-3).",
        endpoints=(
            Seed("llama-3.3-70b", "Llama 3.3 70B", "0.85", "1.20"),
            Seed("llama3.1-8b", "Llama 3.1 8B", "0.10", "0.10"),
            Seed("llama-4-scout-17b-16e-instruct", "Llama 4 Scout", "0.65", "0.85"),
            Seed("qwen-3-32b", "Qwen3 32B", "0.40", "0.80"),
        ),
        claims=(
            ClaimSeed(
                "Llama 3.3 70B",
                "output_tps",
                2100,
                "Cerebras Inference: Llama 70B at 2,100 tokens/s",
                "https://www.cerebras.ai/blog/cerebras-inference-3x-faster",
                date(2024, 10, 24),
            ),
            ClaimSeed(
                "Llama 3.1 405B",
                "output_tps",
                969,
                "Llama 3.1 405B now runs at 969 tokens/s on Cerebras Inference",
                "https://www.cerebras.ai/blog/llama-405b-inference",
                date(2024, 11, 18),
            ),
            ClaimSeed(
                "Llama 3.3 70B",
                "ttft_ms",
                65,
                "Cerebras Inference time to first token",
                "https://www.cerebras.ai/inference",
                date(2024, 11, 18),
                value_high=95,
            ),
            # Use-case figures quoted in the project's seed material (check the vendor's
            # page before relying on them); each is shown only on its workload.
            ClaimSeed(
                "Llama 3.1 8B",
                "output_tps",
                1800,
                "Cerebras Inference: 1,800 tokens/s on CS-3 (vs ~850 on 8×H100)",
                "https://www.cerebras.ai/blog/introducing-cerebras-inference-ai-at-instant-speed",
                date(2024, 8, 27),
                notes="The same source puts 8×H100 GPU clouds at about 850 tokens/s.",
                workload="standard-1k",
            ),
            ClaimSeed(
                "Llama 3.3 70B",
                "e2e_ms",
                720,
                "Code refactor in 0.72 s on wafer-scale (vs 20 s on a GPU cloud)",
                "https://www.cerebras.ai/inference",
                notes="Seed figure: a ~1,500-word refactor; the GPU cloud took about 20 s.",
                workload="code-refactor",
            ),
            ClaimSeed(
                "Llama 3.3 70B",
                "ttft_ms",
                450,
                "Voice agents: turnaround under 450 ms",
                "https://www.cerebras.ai/inference",
                notes="Seed figure: the time before a voice reply starts, an upper bound.",
                workload="voice-turn",
            ),
        ),
    ),
    ProviderSeed(
        "Groq",
        "https://api.groq.com/openai/v1",
        "GROQ_API_KEY",
        website="https://groq.com",
        pricing_url="https://groq.com/pricing",
        notes="LPU inference.",
        endpoints=(
            Seed("llama-3.3-70b-versatile", "Llama 3.3 70B", "0.59", "0.79"),
            Seed("llama-3.1-8b-instant", "Llama 3.1 8B", "0.05", "0.08"),
            Seed("meta-llama/llama-4-scout-17b-16e-instruct", "Llama 4 Scout", "0.11", "0.34"),
            Seed("qwen/qwen3-32b", "Qwen3 32B", "0.29", "0.59"),
        ),
        claims=(
            ClaimSeed(
                "Llama 3.3 70B",
                "output_tps",
                300,
                "Groq model speeds (published tokens/s range for Llama 70B)",
                "https://groq.com/pricing",
                date(2024, 12, 6),
                value_high=500,
            ),
        ),
    ),
    ProviderSeed(
        "SambaNova",
        "https://api.sambanova.ai/v1",
        "SAMBANOVA_API_KEY",
        website="https://cloud.sambanova.ai",
        pricing_url="https://cloud.sambanova.ai/plans/pricing",
        notes="Reconfigurable dataflow unit (RDU).",
        endpoints=(
            Seed("Meta-Llama-3.3-70B-Instruct", "Llama 3.3 70B", "0.60", "1.20"),
            Seed("Meta-Llama-3.1-405B-Instruct", "Llama 3.1 405B", "5.00", "10.00"),
            Seed("Meta-Llama-3.1-8B-Instruct", "Llama 3.1 8B", "0.10", "0.20"),
        ),
        claims=(
            ClaimSeed(
                "Llama 3.1 405B",
                "output_tps",
                132,
                "SambaNova Cloud: Llama 3.1 405B at 132 tokens/s",
                "https://sambanova.ai/blog/sambanova-cloud",
                date(2024, 9, 10),
            ),
        ),
    ),
    ProviderSeed(
        "Together AI",
        "https://api.together.xyz/v1",
        "TOGETHER_API_KEY",
        website="https://www.together.ai",
        pricing_url="https://www.together.ai/pricing",
        notes="GPU cloud.",
        endpoints=(
            Seed("meta-llama/Llama-3.3-70B-Instruct-Turbo", "Llama 3.3 70B", "0.88", "0.88"),
            Seed("meta-llama/Meta-Llama-3.1-405B-Instruct-Turbo", "Llama 3.1 405B", "3.50", "3.50"),
            Seed("meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo", "Llama 3.1 8B", "0.18", "0.18"),
            Seed("deepseek-ai/DeepSeek-V3", "DeepSeek V3", "1.25", "1.25"),
        ),
    ),
    ProviderSeed(
        "Fireworks AI",
        "https://api.fireworks.ai/inference/v1",
        "FIREWORKS_API_KEY",
        website="https://fireworks.ai",
        pricing_url="https://fireworks.ai/pricing",
        notes="GPU cloud.",
        endpoints=(
            Seed(
                "accounts/fireworks/models/llama-v3p3-70b-instruct", "Llama 3.3 70B", "0.90", "0.90"
            ),
            Seed(
                "accounts/fireworks/models/llama-v3p1-405b-instruct",
                "Llama 3.1 405B",
                "3.00",
                "3.00",
            ),
            Seed(
                "accounts/fireworks/models/llama-v3p1-8b-instruct", "Llama 3.1 8B", "0.20", "0.20"
            ),
            Seed("accounts/fireworks/models/deepseek-v3", "DeepSeek V3", "0.90", "0.90"),
        ),
    ),
    ProviderSeed(
        "OpenAI",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        website="https://openai.com/api",
        pricing_url="https://openai.com/api/pricing",
        endpoints=(
            Seed("gpt-4o", "GPT-4o", "2.50", "10.00", "1.25"),
            Seed("gpt-4o-mini", "GPT-4o mini", "0.15", "0.60", "0.075"),
            Seed("gpt-4.1", "GPT-4.1", "2.00", "8.00", "0.50"),
            Seed("gpt-4.1-mini", "GPT-4.1 mini", "0.40", "1.60", "0.10"),
        ),
    ),
    ProviderSeed(
        "Anthropic",
        "https://api.anthropic.com/v1",
        "ANTHROPIC_API_KEY",
        api_style="anthropic-messages",
        website="https://www.anthropic.com/api",
        pricing_url="https://www.anthropic.com/pricing#api",
        endpoints=(
            Seed("claude-sonnet-4-20250514", "Claude Sonnet 4", "3.00", "15.00", "0.30"),
            Seed("claude-3-5-haiku-20241022", "Claude 3.5 Haiku", "0.80", "4.00", "0.08"),
        ),
    ),
    ProviderSeed(
        "DeepInfra",
        "https://api.deepinfra.com/v1/openai",
        "DEEPINFRA_API_KEY",
        website="https://deepinfra.com",
        pricing_url="https://deepinfra.com/pricing",
        notes="GPU cloud.",
        endpoints=(
            Seed("meta-llama/Llama-3.3-70B-Instruct-Turbo", "Llama 3.3 70B", "0.23", "0.40"),
            Seed("meta-llama/Meta-Llama-3.1-405B-Instruct", "Llama 3.1 405B", "0.80", "0.80"),
            Seed("meta-llama/Meta-Llama-3.1-8B-Instruct", "Llama 3.1 8B", "0.03", "0.05"),
            Seed("deepseek-ai/DeepSeek-V3", "DeepSeek V3", "0.49", "0.89"),
        ),
    ),
    ProviderSeed(
        "OpenRouter",
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
        website="https://openrouter.ai",
        pricing_url="https://openrouter.ai/models",
        extra_headers={"X-Title": "Inferwatch"},
        notes="A router: the serving provider varies per request, so its speed is a blend.",
        endpoints=(
            Seed("meta-llama/llama-3.3-70b-instruct", "Llama 3.3 70B", "0.12", "0.30"),
            Seed("openai/gpt-4o-mini", "GPT-4o mini", "0.15", "0.60"),
        ),
    ),
    # Templates for servers you run yourself: no key, no price; enable them in the admin
    # after pointing the base URL at your server.
    ProviderSeed(
        "vLLM (local)",
        "http://127.0.0.1:8001/v1",
        requires_key=False,
        website="https://docs.vllm.ai",
        notes="Template: `vllm serve meta-llama/Llama-3.1-8B-Instruct --port 8001`.",
        endpoints=(Seed("meta-llama/Llama-3.1-8B-Instruct", "Llama 3.1 8B"),),
    ),
    ProviderSeed(
        "llama.cpp (local)",
        "http://127.0.0.1:8080/v1",
        requires_key=False,
        website="https://github.com/ggml-org/llama.cpp",
        notes="Template: `llama-server -m model.gguf --port 8080` (serves one model).",
        endpoints=(Seed("llama-3.1-8b-instruct", "Llama 3.1 8B"),),
        max_concurrency=1,
    ),
    ProviderSeed(
        "Ollama (local)",
        "http://127.0.0.1:11434/v1",
        requires_key=False,
        website="https://ollama.com",
        notes="Template: `ollama pull llama3.1:8b` then `ollama serve`.",
        endpoints=(Seed("llama3.1:8b", "Llama 3.1 8B"),),
        max_concurrency=1,
    ),
]


@dataclass(frozen=True)
class DemoSeed:
    """A simulated provider; `profile` is the simulator's model name selecting its speed.

    Names carry no "(simulated)": every page adds that mark to simulated providers itself.
    Prices are made up, but differ, so the speed-vs-price chart shows a spread.
    """

    name: str
    slug: str  # stable, so renaming a demo provider updates it rather than adding another
    profile: str
    notes: str
    input_per_m: str
    output_per_m: str


# Profile names must match probes/simulator's profiles (the model name selects one), at
# the speeds the seeds quote: 2,100 tok/s wafer-scale, 400 tok/s LPU, 120 tok/s GPU.
DEMO_PROVIDERS = [
    DemoSeed(
        "Wafer-scale",
        "wafer-scale-demo",
        "sim-blazing",
        "Simulates a ~2,100 tok/s wafer-scale engine.",
        "0.85",
        "1.20",
    ),
    DemoSeed("LPU", "lpu-demo", "sim-fast", "Simulates a ~400 tok/s LPU.", "0.59", "0.79"),
    DemoSeed(
        "GPU cloud",
        "gpu-cloud-demo",
        "sim-gpu",
        "Simulates a ~120 tok/s GPU cloud.",
        "0.25",
        "0.40",
    ),
    DemoSeed(
        "Flaky",
        "flaky-demo",
        "sim-flaky",
        "Simulates a provider that fails about one request in four: rate limits, server "
        "errors, streams cut off or stalled.",
        "0.45",
        "0.60",
    ),
]
# Every demo endpoint serves the same model as real providers' endpoints, so the demo
# shows a side-by-side comparison (and sits beside them, marked simulated, once real
# providers are probed).
DEMO_MODEL = "Llama 3.3 70B"
DEMO_CLAIM_SOURCE = "Simulator profile setting"


@dataclass
class LoadReport:
    created: dict[str, int] = field(default_factory=dict)
    # Keys the catalog added once and the operator deleted since: not re-created.
    skipped: list[str] = field(default_factory=list)

    def add(self, kind: str, created: bool) -> None:
        self.created[kind] = self.created.get(kind, 0) + int(created)

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
    """The suite from probes/workloads.py, added where missing; rows the admin edited
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
) -> None:
    """One probe per workload; `interval_s` None means the seed intervals.

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
        _keyed(
            Probe,
            f"probe:{endpoint.catalog_key.partition(':')[2]}/{workload.slug}/{region}",
            {"endpoint": endpoint, "workload": workload, "region": region},
            {"interval_s": every, "jitter_s": min(10, every // 6)},
            "probes",
            report,
        )


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
    return report


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
        endpoint_seed = Seed(seed.profile, DEMO_MODEL, seed.input_per_m, seed.output_per_m)
        endpoint = _endpoint(provider, endpoint_seed, "", report)
        if endpoint is None:
            continue
        _probes(endpoint, workloads, region, report, interval_s=DEMO_INTERVAL_S)
        _demo_claim(endpoint, BUILTIN[seed.profile], report)
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
