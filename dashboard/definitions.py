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
        # Tails as columns of their own: a median can hide a provider whose slow
        # requests take seconds.
        *(
            Metric(
                f"{name}_p95",
                f"p95 {contract.RUN_FIELDS[name].label}",
                "ms",
                f"The 95th percentile over the window: one request in twenty is slower. "
                f"{contract.RUN_FIELDS[name].definition}",
            )
            for name in ("ttft_ms", "e2e_ms")
        ),
        Metric(
            "stream_tps",
            "Per-stream speed",
            "tokens/s",
            "Concurrent workloads: the median output speed of each request of the batch "
            "(not the baseline sent alone), the speed one stream sees under load. The group's "
            "Output speed is the batch's aggregate; a vendor's tokens/s claim made about "
            "this workload is compared with this figure (a claim about no workload, one "
            "stream alone, is not compared here).",
            better="higher",
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
            "for the same metric, and measured as a share of claimed. Like with like: a "
            "claim about a workload is shown on that workload only; a claim about none is "
            "about one stream alone, so it is shown beside every workload whose requests run "
            "one at a time and never beside a concurrent one (each of 8 streams at once runs "
            "slower than one alone). Our own probes of one endpoint run one at a time "
            "(planned apart, and held apart when one runs long), so none slows another's "
            "measurement.",
        ),
    ]
}

# Per-run fields shown on run pages and in the API, with their contract definitions
# (what the engine measured, then what the workload's checks judged).
RUN_FIELDS: dict[str, str] = {
    name: f.definition for name, f in {**contract.RUN_FIELDS, **contract.WORKLOAD_FIELDS}.items()
}

PERCENTILES = (5, 25, 50, 75, 95, 99)

# Uptime by cause: every status falls in one of these (the leaderboard's strip, the
# endpoint page's bars, the API's availability_by_cause), so a failure says why.
AVAILABILITY_CAUSES: dict[str, str] = {
    "ok": "ok",
    "rate_limited": "rate-limited (429)",
    "server_error": "server error (5xx)",
    "timeout": "timeout",
    "other": "other error",
}


def cause_of(status: str) -> str:
    """The AVAILABILITY_CAUSES key of a run status (the contract's timeouts are one)."""
    if status in ("ok", "rate_limited", "server_error"):
        return status
    return "timeout" if status.startswith("timeout_") else "other"


def runs_by_cause(status_counts: dict[str, int]) -> dict[str, int]:
    """Runs per AVAILABILITY_CAUSES key, from runs per status."""
    out = dict.fromkeys(AVAILABILITY_CAUSES, 0)
    for status, n in status_counts.items():
        out[cause_of(status)] += n
    return out


def shares_by_cause(status_counts: dict[str, int]) -> dict[str, float] | None:
    """Of a set of runs, the share per cause (the five sum to 1); None without runs."""
    total = sum(status_counts.values())
    if not total:
        return None
    return {cause: n / total for cause, n in runs_by_cause(status_counts).items()}


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
