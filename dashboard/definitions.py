"""What each number on the pages means, in one place.

The methodology page renders these; every column header, API field description and
Prometheus help text links to or reuses them, so a definition is written once. The
per-run metrics and statuses come from the measurement contract
(probes/engine/contract.py); the window figures (price, success, samples) are the read
side's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from probes.engine import contract


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    definition: str
    better: str = "lower"  # "higher" or "lower": which way a ranking reads


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        *(
            Metric(f.name, f.label, f.unit, f.definition, better=f.better or "lower")
            for f in (
                contract.RUN_FIELDS[m]
                for m in ("output_tps", *(m for m in contract.ROLLUP_METRICS if m != "output_tps"))
            )
        ),
        Metric(
            "valid_share",
            "Valid",
            "%",
            "JSON and tool-call workloads: of the window's ok runs whose answer was checked, "
            "the share that passed (the JSON parses and follows the schema; a defined tool "
            "was called with arguments that parse and follow its schema). A fast wrong "
            "answer is not a fast answer.",
            better="higher",
        ),
        Metric(
            "blended_price",
            "Blended price",
            "$/M tokens",
            "(3 × input price + output price) / 4 per million tokens, from the list price "
            "in force today: Artificial Analysis' 3:1 blend.",
        ),
        Metric(
            "success_rate",
            "Success",
            "%",
            "Runs with status ok / all runs in the window. Failed runs never enter latency "
            "or speed statistics; they make up this availability figure.",
            better="higher",
        ),
        Metric(
            "samples",
            "Samples",
            "runs",
            "Runs in the window, failed ones included.",
            better="higher",
        ),
        Metric(
            "last_run",
            "Last run",
            "",
            "When the newest run in the window started (UTC).",
        ),
        Metric(
            "claim",
            "Claimed vs measured",
            "",
            "A figure the vendor published (source linked in the admin), beside our median "
            "for the same metric, and measured as a share of claimed.",
        ),
    ]
}

# Per-run fields shown on run pages and in the API, with their contract definitions
# (what the engine measured, then what the workload's checks judged).
RUN_FIELDS: dict[str, str] = {
    name: f.definition for name, f in {**contract.RUN_FIELDS, **contract.WORKLOAD_FIELDS}.items()
}

PERCENTILES = (5, 25, 50, 75, 95)

# The ≈ beside a leaderboard row's speed (contract.approx_tokens over the window's runs).
APPROX_TOKENS = (
    "Counted by the server's tokenizer / o200k, not the provider's usage: some of the "
    "window's ok runs streamed no usage, so their token counts (and tokens/s) come from "
    "the server's tokenize route, Ollama's eval_count or our o200k count."
)

STATUS_MEANINGS: dict[str, str] = contract.STATUS_MEANINGS

# How we differ from other public benchmarks, where we do.
COMPARISONS: list[tuple[str, str]] = [
    (
        "Artificial Analysis",
        "Same TTFT definition (reasoning counts) and the same 3:1 blended price and 72 h "
        "default window. We also report time to first answer token separately, publish "
        "p5–p95 instead of the median alone, keep every run with its token timeline, and "
        "show vendor claims beside our measurement.",
    ),
    (
        "LLMPerf",
        "LLMPerf's output throughput includes TTFT in the denominator; our output_tps "
        "excludes it (e2e_tps is the figure that includes it). LLMPerf counts tokens with "
        "one tokenizer; we prefer the provider's usage and also keep an o200k count for "
        "comparison across tokenizers.",
    ),
    (
        "vLLM benchmark",
        "vLLM's benchmark stamps TTFT at the first chunk with choices, which can be a "
        "role-only chunk; we stamp it at the first chunk carrying output. Its rate formula "
        "subtracts one token; with batched chunks we subtract the first event's tokens. "
        "Its ITL is per token; ours is per output event (chunk).",
    ),
]
