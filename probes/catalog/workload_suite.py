"""The standard workload suite: seed data the catalog loader turns into Workload rows.

The admin may edit the rows or add more. Every run's prompt is generated from the row and
a seed (probes/prompts): fresh per run, reproducible from the stored seed. Input sizes
are o200k_base tokens. How a workload becomes requests is its kind's business
(probes/kinds/).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Old slugs still accepted in URLs, the API and `measure` (migration 0005 renamed them).
ALIASES = {"chat-1k": "standard-1k", "short": "chat-short"}
DEFAULT_SLUG = "standard-1k"
# Set in params by migration 0005 on rows that predate generated prompts: they keep their
# fixed messages until the catalog is loaded again, which gives them the suite's fields.
LEGACY_MARK = "legacy_fixed_prompt"


def canonical_slug(slug: str) -> str:
    return ALIASES.get(slug, slug)


@dataclass(frozen=True)
class WorkloadSeed:
    """One workload of the suite; field names are those of probes.models.Workload."""

    slug: str
    name: str
    description: str
    max_tokens: int
    target_output_tokens: int | None
    approx_input_tokens: int | None
    instruction: str
    material: str = "prose"
    system: str = ""
    kind: str = "single"
    answer_check: str = ""
    requests: int = 1
    params: dict[str, Any] = field(default_factory=dict, hash=False)
    messages: list[dict[str, Any]] = field(default_factory=list, hash=False)
    reasoning: bool = False  # probed only on reasoning models (added by hand)

    def row_fields(self) -> dict[str, Any]:
        names = [
            "name",
            "description",
            "max_tokens",
            "target_output_tokens",
            "approx_input_tokens",
            "instruction",
            "material",
            "system",
            "kind",
            "answer_check",
            "requests",
            "params",
            "messages",
        ]
        return {name: getattr(self, name) for name in names}

    @property
    def input_tokens(self) -> int:
        """The prompt's target size in o200k_base tokens (each run's prompt is within
        10 % of it): what context fitting judges by."""
        return self.approx_input_tokens or 0


_ESSAY = (
    "Write a detailed essay of about {words} words on why shared units and repeatable "
    "methods matter in science and engineering, drawing on the sections above."
)
_WEATHER_TOOL = {
    "name": "get_weather",
    "description": "Current weather and the next hours' forecast for a place.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            "hours": {"type": "integer", "description": "Hours of forecast, 1-48"},
        },
        "required": ["city", "unit", "hours"],
        "additionalProperties": False,
    },
}
_FACTS_SCHEMA = {
    "type": "object",
    "properties": {
        "topics": {"type": "array", "items": {"type": "string"}},
        "measurement_count": {"type": "integer"},
        "summary": {"type": "string"},
        "mentions_time": {"type": "boolean"},
    },
    "required": ["topics", "measurement_count", "summary", "mentions_time"],
    "additionalProperties": False,
}

WORKLOADS: tuple[WorkloadSeed, ...] = (
    WorkloadSeed(
        slug="chat-short",
        name="Chat, short",
        description="About 100 input tokens and 300 output tokens: a quick question.",
        max_tokens=400,
        target_output_tokens=300,
        approx_input_tokens=100,
        instruction="In about {words} words, explain what the sentences above have in common.",
    ),
    WorkloadSeed(
        slug="standard-1k",
        name="Standard, ~1,000 in / 1,000 out",
        description=(
            "The headline workload: about 1,000 input tokens and at least 1,000 output "
            "tokens, like Artificial Analysis' standard prompt; long enough for a stable "
            "tokens/s figure."
        ),
        max_tokens=1300,
        target_output_tokens=1000,
        approx_input_tokens=1000,
        system="You are a helpful, precise assistant.",
        instruction=_ESSAY,
    ),
    WorkloadSeed(
        slug="long-10k",
        name="Long input, ~10,000 tokens",
        description=(
            "About 10,000 fresh input tokens and 1,500 out: TTFT is a real prefill "
            "(prefill tok/s = uncached input tokens / TTFT), never a cache hit."
        ),
        max_tokens=1800,
        target_output_tokens=1500,
        approx_input_tokens=10000,
        system="You are a careful reader.",
        instruction=(
            "List the distinct topics of the sections above, then write about {words} "
            "words on what they have in common."
        ),
    ),
    WorkloadSeed(
        slug="cached-10k",
        name="Cached prefix, ~10,000 tokens twice",
        description=(
            "A long-10k prompt sent twice in a row: the first TTFT is cold, the second "
            "can be served from the provider's prompt cache. Shows what caching buys in "
            "time and price."
        ),
        max_tokens=400,
        target_output_tokens=300,
        approx_input_tokens=10000,
        system="You are a careful reader.",
        instruction="In about {words} words, say what the sections above have in common.",
        kind="cached",
        requests=2,
    ),
    WorkloadSeed(
        slug="code-refactor",
        name="Code refactor",
        description=(
            "A 150-line Python module to refactor, about 2,000 tokens out: the total time "
            "is the headline (vendors quote 0.72 s on wafer-scale vs 20 s on GPUs)."
        ),
        max_tokens=2600,
        target_output_tokens=2000,
        approx_input_tokens=1450,
        material="code",
        system="You are a senior Python engineer.",
        instruction=(
            "Refactor this module: dataclasses instead of dicts, no globals, pathlib and "
            "context managers, exceptions instead of prints, and the pricing rules in one "
            "place. Return the complete new module (about {words} words of code)."
        ),
    ),
    WorkloadSeed(
        slug="voice-turn",
        name="Voice turn",
        description=(
            "A short spoken turn: the headline is the time until the first sentence is "
            "complete, when a speech engine can start speaking (target < 450 ms)."
        ),
        max_tokens=200,
        target_output_tokens=120,
        approx_input_tokens=78,
        material="turn",
        system="You are a voice assistant. Answer in short, natural spoken sentences.",
        instruction="Answer in about {words} words.",
        answer_check="first_sentence",
    ),
    WorkloadSeed(
        slug="agent-loop",
        name="Agent loop, 10 steps",
        description=(
            "Ten sequential requests, each fed the previous answer: the total loop time "
            "ranks; every step is stored."
        ),
        max_tokens=300,
        target_output_tokens=200,
        approx_input_tokens=600,
        system="You are a planning agent. Keep plans concrete and numbered.",
        instruction=(
            "Using the notes above, draft a numbered plan for a town to publish reliable "
            "weekly rainfall figures, in about {words} words."
        ),
        kind="loop",
        requests=10,
    ),
    WorkloadSeed(
        slug="json-schema",
        name="Structured JSON",
        description=(
            "Structured output with a JSON schema: whether the answer parses and follows "
            "the schema (yes/no) beside the speed."
        ),
        max_tokens=400,
        target_output_tokens=None,
        approx_input_tokens=400,
        instruction=(
            "Extract from the sections above: the topics, how many distinct measurements "
            "are described, a one-sentence summary, and whether time-keeping is mentioned. "
            "Answer with JSON only."
        ),
        answer_check="json_schema",
        params={"schema": _FACTS_SCHEMA},
    ),
    WorkloadSeed(
        slug="tool-call",
        name="Tool call",
        description=(
            "Tools defined and the answer must be a call: the time to the complete call, "
            "and whether its arguments parse and follow the tool's schema."
        ),
        max_tokens=200,
        target_output_tokens=None,
        approx_input_tokens=150,
        material="turn",
        system="You are an assistant with tools. Use them instead of guessing.",
        instruction="Check the weather for my city for the next 12 hours in celsius.",
        answer_check="tool_call",
        params={"tools": [_WEATHER_TOOL]},
    ),
    WorkloadSeed(
        slug="parallel-8",
        name="Parallel, 8 concurrent",
        description=(
            "One request alone, then 8 concurrent ones (fresh prompts each): aggregate "
            "output tok/s and how much slower each request streams than the single one. "
            "For another N, add a workload in the admin."
        ),
        max_tokens=600,
        target_output_tokens=500,
        approx_input_tokens=1000,
        system="You are a helpful, precise assistant.",
        instruction=_ESSAY,
        kind="parallel",
        requests=8,
    ),
    WorkloadSeed(
        slug="reasoning",
        name="Reasoning puzzle",
        description=(
            "A small logic puzzle for reasoning models: TTFT includes thinking, TTFAT "
            "shows when the answer starts. Generous max_tokens so thinking can finish."
        ),
        max_tokens=2000,
        target_output_tokens=None,
        approx_input_tokens=None,
        material="puzzle",
        instruction="",
        reasoning=True,
    ),
)

BY_SLUG = {w.slug: w for w in WORKLOADS}

# On demand only (``measure --workload sweep``, or a copy added in the admin for a
# self-hosted endpoint): not in the suite, so the catalog never schedules 31 requests
# against every paid API it knows.
SWEEP = WorkloadSeed(
    slug="sweep",
    name="Concurrency sweep",
    description=(
        "The same fresh-prompt request at 1, 2, 4, 8 and 16 streams at once (params "
        "ladder), stopping at the endpoint's cap: per-request and aggregate tok/s, TTFT "
        "p50/p95 and goodput at the target in params (ttft_slo_ms, tpot_slo_ms) per step."
    ),
    max_tokens=300,
    target_output_tokens=250,
    approx_input_tokens=500,
    system="You are a helpful, precise assistant.",
    instruction=_ESSAY,
    kind="sweep",
    requests=16,
    params={"ladder": [1, 2, 4, 8, 16], "ttft_slo_ms": 2000, "tpot_slo_ms": 100},
)
ON_DEMAND = {SWEEP.slug: SWEEP}


def get(slug: str) -> WorkloadSeed:
    try:
        return {**BY_SLUG, **ON_DEMAND}[canonical_slug(slug)]
    except KeyError:
        known = ", ".join([*BY_SLUG, *ON_DEMAND])
        raise KeyError(f"unknown workload {slug!r}; known: {known}") from None
