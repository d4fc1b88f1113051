"""The standard workload suite, and how a workload becomes requests.

The catalog loader turns each entry into a Workload row (the admin may edit it or add
more). Every run's prompt is generated from the row and a seed (probes/prompts): fresh
per run, reproducible from the stored seed. Input sizes are o200k_base tokens.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from probes import checks
from probes.engine import dialects
from probes.engine.contract import PREFILL_MIN_TOKENS
from probes.prompts import SIZE_TOLERANCE, PromptSpec

# Old slugs still accepted in URLs, the API and `measure` (migration 0005 renamed them).
ALIASES = {"chat-1k": "standard-1k", "short": "chat-short"}
DEFAULT_SLUG = "standard-1k"
# Set in params by migration 0005 on rows that predate generated prompts: they keep their
# fixed messages until the catalog is loaded again, which gives them the suite's fields.
LEGACY_MARK = "legacy_fixed_prompt"

_SEED_NAMESPACE = uuid.UUID("0b7f6f0e-7f53-4a39-9d55-2f1f3c1b9a64")


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


# -- from a workload (row or seed) to requests -----------------------------------------


def prompt_spec(workload: Any) -> PromptSpec:
    """The prompt generator's view of a Workload row (or a WorkloadSeed)."""
    return PromptSpec(
        slug=workload.slug,
        material=workload.material,
        input_tokens=workload.approx_input_tokens or 0,
        instruction=workload.instruction,
        system=workload.system,
        output_tokens=workload.target_output_tokens or workload.max_tokens,
        fixed_messages=list(workload.messages or []),
    )


def measures_prefill(workload: Any) -> bool:
    """Is every prompt of this workload long enough for a prefill rate (the contract's
    PREFILL_MIN_TOKENS, even at the low end of the prompt's size tolerance)? Where only
    some are, the rate would be missing from about half the runs and ranked on the rest."""
    low_end = (workload.approx_input_tokens or 0) * (1 - SIZE_TOLERANCE)
    return low_end >= PREFILL_MIN_TOKENS


def headline_metrics(workload: Any) -> frozenset[str]:
    """The leaderboard columns this workload has beyond the common ones, read from its
    data (kind, answer check, prompt size), never its slug: an admin-added workload
    (parallel-16, another JSON task) gets the same columns as the suite's own.

    Names are the contract's rolled-up metrics, ``valid_share`` (of the window's
    checked answers, the share that passed: rollups count both) and ``stream_tps`` (a
    concurrent batch's per-request speed, dashboard/queries/streams.py).
    """
    shown = set()
    if measures_prefill(workload):
        shown.add("prefill_tps")
    if workload.kind == "cached":
        shown |= {"cold_ttft_ms", "ttft_saved_pct", "cost_saved_pct"}
    if workload.kind == "parallel":
        shown |= {"stream_tps", "slowdown"}
    if workload.answer_check == "first_sentence":
        shown.add("first_sentence_ms")
    if workload.answer_check == "tool_call":
        shown.add("tool_call_ms")
    if workload.answer_check in checks.WHOLE_ANSWER_CHECKS:
        shown.add("valid_share")
    return frozenset(shown)


def rank_metric(workload: Any) -> str:
    """The figure a workload's board ranks by, read from its data as headline_metrics:
    the complete tool call, the first sentence of a voice turn, a loop's total time; TTFT
    for another checked whole answer (a JSON object is too short to rank on speed);
    output speed for the rest."""
    if workload.answer_check == "tool_call":
        return "tool_call_ms"
    if workload.answer_check == "first_sentence":
        return "first_sentence_ms"
    if workload.kind == "loop":
        return "e2e_ms"
    if workload.kind == "parallel":
        return "stream_tps"  # each stream's speed; the aggregate and slowdown beside it
    if workload.answer_check in checks.WHOLE_ANSWER_CHECKS:
        return "ttft_ms"
    return "output_tps"


def seed_for(run_identity: str) -> int:
    """A 63-bit seed from a run's identity (probe, slot, request): stable, unique."""
    return uuid.uuid5(_SEED_NAMESPACE, run_identity).int >> 65


def request_extras(workload: Any, api: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(body fields, headers) the workload's check needs: a schema or tools."""
    params = workload.params or {}
    dialect = dialects.get(api)  # each API spells a schema or tools its own way
    if workload.answer_check == "json_schema":
        schema = params.get("schema")
        return dialect.structured_body(schema=schema), dialect.structured_headers(schema)
    if workload.answer_check == "tool_call":
        return dialect.structured_body(tools=params.get("tools")), {}
    return {}, {}


def length_fields(workload: Any, control: str, max_tokens: int) -> dict[str, Any]:
    """Body fields holding the answer to the workload's length (an endpoint's
    ``length_control``): ``min_tokens`` no end before the target, ``ignore_eos`` always
    ``max_tokens``. Only where there is a target and the answer may run on: never for a
    checked JSON answer or tool call (padded past its end it fails the check); a voice
    turn's first sentence or a loop step's plan is the same with more after it."""
    target = workload.target_output_tokens
    if not control or not target or workload.answer_check in checks.WHOLE_ANSWER_CHECKS:
        return {}
    if control == "ignore_eos":
        return {"ignore_eos": True}
    return {"min_tokens": min(target, max_tokens)}
