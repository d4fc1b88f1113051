"""The seed catalog's data: real providers with their public base URLs, model ids, list
prices and published speed claims, plus the simulated demo providers (loaded by
probes/catalog/loader.py).

Prices and model ids are the providers' public list figures AS OF `CATALOG_AS_OF`; check
each provider's pricing page (the `source_url`) before relying on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

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
# No random delay: the planner lays each demo endpoint's probes end to end within the
# minute (probes/scheduling/planner.py), and 10 s of jitter on each would not fit there
# (the GPU endpoint's minute would need 73 s): its probes would overlap, each slowing the
# other's streams, and its claims read 73 % where one probe alone met them.
DEMO_JITTER_S = 0
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
                # When the reply can start being spoken: the end of the first sentence
                # (a first token is not yet something to say).
                "first_sentence_ms",
                450,
                "Voice agents: turnaround under 450 ms",
                "https://www.cerebras.ai/inference",
                notes="Seed figure: the time before a voice reply starts, an upper bound.",
                workload="voice-turn",
            ),
            ClaimSeed(
                "Llama 3.3 70B",
                # tokens/s per watt = output tokens per joule: measured where the endpoint
                # names a power source (a self-hosted server's DCGM exporter).
                "output_tokens_per_j",
                78,
                "Energy efficiency: 78 tokens/s per watt on CS-3 (vs 15 on 8×H100)",
                "https://www.cerebras.ai/inference",
                notes="Seed figure: the same comparison puts 8×H100 at about 15 tokens/s per "
                "watt. Comparable only with runs whose endpoint has a power source.",
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
    # Half the input price for prompt-cache hits, as several real providers charge: the
    # cached-10k workload then shows what the cache saves in money too.
    cached_input_per_m: str | None = None


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
        "0.425",
    ),
    DemoSeed("LPU", "lpu-demo", "sim-fast", "Simulates a ~400 tok/s LPU.", "0.59", "0.79", "0.295"),
    DemoSeed(
        "GPU cloud",
        "gpu-cloud-demo",
        "sim-gpu",
        "Simulates a ~120 tok/s GPU cloud.",
        "0.25",
        "0.40",
        "0.125",
    ),
    DemoSeed(
        "Flaky",
        "flaky-demo",
        "sim-flaky",
        "Simulates a provider that fails about one request in four: rate limits, server "
        "errors, streams cut off or stalled.",
        "0.45",
        "0.60",
        "0.225",
    ),
]
# Every demo endpoint serves the same model as real providers' endpoints, so the demo
# shows a side-by-side comparison (and sits beside them, marked simulated, once real
# providers are probed).
DEMO_MODEL = "Llama 3.3 70B"
DEMO_CLAIM_SOURCE = "Simulator profile setting"
