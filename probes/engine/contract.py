"""The measurement contract (the methodology, /methodology/), each fact written once.

Run statuses, every per-run field the engine records (with its unit, which way is
better, and its definition), which metrics rollups keep as histograms, the rule that
says whether a run counts for speed, and the methodology version. The model choices,
the rollup SQL, the API fields and CSV columns, the methodology page, the alert metrics
and the Prometheus names are all derived from here (tests/test_contract.py checks
that nothing is left out).
"""

from __future__ import annotations

from dataclasses import dataclass

# How a run ended is part of the contract; its statuses are written once in statuses.py.
from .statuses import (  # noqa: F401 (re-exported: the contract's names)
    CHECK_DETAIL_TEXT,
    FINISH_REASON_TEXT,
    RETRYABLE_STATUSES,
    STATUS_CHOICES,
    STATUS_INFO,
    STATUS_MEANINGS,
    STATUSES,
    Status,
)

# Bump on any change to a definition of /methodology/ or to how we apply it.
# 2: t0 on a warm connection is the request body's send (/methodology/#clock).
METHODOLOGY_VERSION = 2

# Runs with fewer output tokens keep their TTFT but are flagged short_output and left
# out of speed statistics. The deployment may set its own (setting MIN_SPEED_TOKENS).
MIN_SPEED_TOKENS = 50


def counts_for_speed(output_tokens: int | None, min_tokens: int = MIN_SPEED_TOKENS) -> bool:
    """Is a run long enough for its speed to rank? (Its latencies always count.)"""
    return output_tokens is not None and output_tokens >= min_tokens


# A prefill rate is given only for at least this many uncached prompt tokens: below it the
# network round trip and queueing inside TTFT dominate and the figure means nothing.
PREFILL_MIN_TOKENS = 1000


# -- per-run fields ---------------------------------------------------------------------------

NUMBER, TEXT, FLAG, JSON = "number", "text", "flag", "json"


@dataclass(frozen=True)
class RunField:
    """One field of a measured run, under the same name in RunResult, ProbeRun and the API."""

    name: str
    unit: str  # "ms", "tokens/s", "tokens", "USD", "" for facts without a unit
    better: str | None  # "higher", "lower", or None where neither way is better
    definition: str
    kind: str = NUMBER  # how it is stored: NUMBER (null when absent), TEXT (blank), FLAG
    label: str = ""  # short column header, for the metrics pages show
    title: str = ""  # the full name, where a choice list needs one
    speed: bool = False  # a speed: only runs that count for speed enter its statistics


_TTFT = (
    "Time to first token: request start → first output event of any channel. "
    "Reasoning counts, as in Artificial Analysis' definition. Measured on a warm "
    "connection unless the run is marked cold_connection."
)

# What a run measured, in the order run pages and the API show them.
_MEASURED = (
    RunField("ttfb_ms", "ms", "lower", "Request start (t0, see Clock) → headers received."),
    RunField("ttft_ms", "ms", "lower", _TTFT, label="TTFT", title="Time to first token"),
    RunField(
        "ttfat_ms",
        "ms",
        "lower",
        "Time to first answer token: request start → first answer event (text or tool "
        "call), after any reasoning. Empty when no answer arrived.",
        label="First answer",
        title="Time to first answer token",
    ),
    RunField(
        "e2e_ms",
        "ms",
        "lower",
        "Request start → end of stream (completion marker read, or connection closed): "
        "what a user waiting for the whole answer waits.",
        label="End-to-end",
        title="End-to-end time",
    ),
    RunField(
        "prefill_tps",
        "tokens/s",
        "higher",
        "Client-side prefill rate: uncached prompt tokens (input_tokens − "
        "cached_input_tokens from usage; without usage, our o200k count of a prompt the "
        "provider cannot have cached) / TTFT. TTFT includes the network round trip and "
        "any queueing, so this is a lower bound on the server's own rate. Only for at "
        "least PREFILL_MIN_TOKENS (1,000) uncached tokens, where prompt processing "
        "dominates TTFT; empty below that, and when hidden reasoning was generated "
        "inside TTFT. A cached-10k group shows its cold request's rate (the warm one "
        "is served from cache).",
        label="Prefill",
        title="Prefill speed",
    ),
    RunField(
        "connect_ms",
        "ms",
        "lower",
        "DNS, TCP and TLS setup, timed separately; empty on a reused connection.",
    ),
    RunField(
        "output_tokens",
        "tokens",
        None,
        "Tokens generated, reasoning included: the provider's usage figure when reported "
        "(last value); without usage, the server's own tokenizer when the endpoint names "
        "one; else our own o200k count. Pages mark counts not from usage ≈.",
    ),
    RunField(
        "token_source",
        "",
        None,
        "usage (the provider's count); llama.cpp, vllm or llama-cpp-python (the server's "
        "tokenize route counted the streamed text); ollama (its final eval_count); o200k "
        "(our count: can be far off the model's tokenizer).",
        TEXT,
    ),
    RunField(
        "output_tokens_o200k",
        "tokens",
        None,
        "Our count of all received output text with the o200k_base encoding, comparable "
        "across tokenizers; empty where output is hidden.",
    ),
    RunField(
        "output_tps",
        "tokens/s",
        "higher",
        "Output tokens per second after the first token: (output_tokens − tokens of the "
        "first output event) / (time of last output event − time of first). Excludes "
        "TTFT. Runs with fewer than MIN_SPEED_TOKENS output tokens are flagged "
        "short_output and left out of speed rankings.",
        label="Output speed",
        title="Output speed",
        speed=True,
    ),
    RunField(
        "output_tps_o200k",
        "tokens/s",
        "higher",
        "Output speed computed with output_tokens_o200k.",
        speed=True,
    ),
    RunField("e2e_tps", "tokens/s", "higher", "output_tokens / end-to-end time."),
    RunField(
        "itl_ms_p50",
        "ms",
        "lower",
        "Median gap between consecutive output events (chunk-level ITL).",
    ),
    RunField("itl_ms_p95", "ms", "lower", "95th percentile gap between consecutive output events."),
    RunField(
        "itl_ms_p99",
        "ms",
        "lower",
        "99th percentile gap: read as stalls, dominated by VM wake-ups at speed.",
    ),
    RunField("itl_ms_max", "ms", "lower", "Longest gap between consecutive output events."),
    RunField(
        "tpot_ms",
        "ms",
        "lower",
        "(time of last output − time of first output) / (output_tokens − 1).",
    ),
    RunField(
        "output_events",
        "events",
        None,
        "Streamed chunks carrying output (answer, reasoning or tool call).",
    ),
    RunField(
        "tokens_per_event",
        "tokens",
        None,
        "output_tokens / output_events: shows server-side batching.",
    ),
    RunField(
        "reasoning_tokens", "tokens", None, "From the provider's usage details, when reported."
    ),
    RunField(
        "input_tokens",
        "tokens",
        None,
        "The provider's count of the prompt, from usage. Without usage, when the endpoint "
        "names a tokenize route, the server's tokenizer's count of the prompt's text (the "
        "messages' content: the chat template's few tokens are not in it), with "
        "token_source naming the route.",
    ),
    RunField("cached_input_tokens", "tokens", None, "From usage."),
    RunField("finish_reason", "", None, FINISH_REASON_TEXT, TEXT),
    RunField(
        "cost_usd",
        "USD",
        "lower",
        "(input − cached) × input price + cached × cached price + output × output price, "
        "per million, with the prices in force at the run's time.",
    ),
    RunField(
        "provider_cost_usd", "USD", "lower", "The cost the provider itself reported, when it does."
    ),
    RunField(
        "server_queue_ms",
        "ms",
        "lower",
        "The server's queue time: provider-reported in the response, or from a self-hosted "
        "server's /metrics (histogram sum delta / count delta over the run's window; see "
        "server_window).",
        label="Server queue",
        title="Server queue time",
    ),
    RunField(
        "server_prefill_ms",
        "ms",
        "lower",
        "The server's prompt processing time: provider-reported, or from /metrics as "
        "server_queue_ms.",
    ),
    RunField(
        "server_prefill_tps",
        "tokens/s",
        "higher",
        "The same uncached prompt tokens as prefill_tps / server_prefill_ms: the prefill "
        "rate by the provider's own clock (no network inside), under the same "
        "1,000-token floor.",
    ),
    RunField(
        "server_decode_ms",
        "ms",
        "lower",
        "The server's generation time: provider-reported, or from /metrics as server_queue_ms.",
    ),
    RunField(
        "server_total_ms",
        "ms",
        "lower",
        "Provider-reported total time (or queue + prefill + decode from /metrics).",
    ),
    RunField("server_output_tps", "tokens/s", "higher", "Provider-reported output speed."),
    RunField(
        "server_window",
        "",
        None,
        "Where the server figures come from: per-request (the response's own figures, "
        "preferred); exact (/metrics deltas over a window in which the server finished "
        "our request only and ran or queued no other at either read: our request's own "
        "times); shared (it finished others too, or others ran beside ours: the deltas "
        "are means over all it finished, ours included). Empty without server figures.",
        TEXT,
    ),
    RunField(
        "server_running_requests",
        "requests",
        None,
        "Requests the server was running, the higher of its /metrics gauge before and "
        "after the run (ours is not running at either read): others' load.",
        label="Server running",
        title="Requests running on the server",
    ),
    RunField(
        "server_waiting_requests",
        "requests",
        "lower",
        "Requests waiting in the server's queue, the higher of the two reads.",
    ),
    RunField(
        "server_kv_cache_pct", "%", None, "The server's KV-cache use, the higher of the two reads."
    ),
    RunField(
        "server_prefix_hit_pct",
        "%",
        "higher",
        "Prefix-cache hits / queries (tokens) over the window, from the server's /metrics.",
    ),
    RunField(
        "network_rtt_ms",
        "ms",
        "lower",
        "The TCP handshake to the host (DNS included), timed on the run's connection: one "
        "network round trip, measured rather than left as a remainder.",
    ),
    RunField("tls_ms", "ms", "lower", "The TLS handshake on the run's connection."),
    RunField(
        "energy_j",
        "J",
        "lower",
        "Energy the power source counted over the run's window (its counter read just "
        "before the request and just after the stream: the window's grace is those reads' "
        "time, some ms). A counter that went down was reset inside the window: the run's "
        "energy is void (empty), never a negative; a delta above 5 kW per GPU is void "
        "too.",
        label="Energy",
        title="Energy per run",
    ),
    RunField(
        "energy_j_per_token",
        "J/token",
        "lower",
        "energy_j / output_tokens.",
        label="J/token",
        title="Energy per output token",
    ),
    RunField(
        "output_tokens_per_j",
        "tokens/J",
        "higher",
        "output_tokens / energy_j.",
        label="Tokens/J",
        title="Output tokens per joule",
    ),
    RunField(
        "tps_per_w",
        "tokens/s/W",
        "higher",
        "Output tokens per second per watt over the window: the same number as "
        "output_tokens_per_j, in the unit vendors quote.",
    ),
    RunField(
        "energy_above_idle_j",
        "J",
        "lower",
        "energy_j − the power measured between the previous run and this one × the "
        "window: what the run added to the idle draw (idle unless others ran between).",
    ),
    RunField(
        "output_tokens_per_j_above_idle",
        "tokens/J",
        "higher",
        "output_tokens / energy_above_idle_j.",
    ),
    RunField(
        "energy_window",
        "",
        None,
        "exact: the server ran nothing else in the window (by its /metrics); shared: "
        "others' requests drew power too; empty when the server's metrics are unknown.",
        TEXT,
    ),
    RunField(
        "first_sentence_ms",
        "ms",
        "lower",
        "Request start → the output event that ends the first sentence (. ! or ? then a "
        "space or the end of the text): when a voice assistant can start speaking.",
        label="First sentence",
        title="Time to first sentence",
    ),
    RunField(
        "tool_call_ms",
        "ms",
        "lower",
        "Request start → the last tool-call delta: when the call is complete and a client "
        "can act on it.",
        label="Tool call",
        title="Time to complete tool call",
    ),
    # A run group's own figures (its kind, probes/kinds/, fills them on the group's summary row;
    # empty on every other run): the headline of a cached or a parallel workload.
    RunField(
        "cold_ttft_ms",
        "ms",
        "lower",
        "Cached groups: TTFT of the cold request, the prompt's first sending (the group's "
        "ttft_ms is the warm request's, what a repeat user meets).",
        label="Cold TTFT",
        title="Cold time to first token",
    ),
    RunField(
        "ttft_saved_pct",
        "%",
        "higher",
        "Cached groups: 100 × (1 − warm TTFT / cold TTFT), what the provider's prompt "
        "cache takes off the time to first token. About 0 without a cache, and then "
        "negative about as often as positive (noise).",
        label="TTFT saved",
        title="TTFT saved by the prompt cache",
    ),
    RunField(
        "cost_saved_pct",
        "%",
        "higher",
        "Cached groups: 100 × (1 − warm cost / cold cost) at the prices in force: what the "
        "cache discount takes off the price of a repeated prompt (output tokens included, "
        "so answers of different lengths move it too). Empty without a price.",
        label="Cost saved",
        title="Cost saved by the prompt cache",
    ),
    RunField(
        "slowdown",
        "×",
        "lower",
        "Parallel groups: the output speed of one request alone / the median output speed "
        "of the concurrent requests: how much slower each stream gets under load (1 = "
        "none). The group's output_tps is the aggregate of all streams.",
        label="Slowdown",
        title="Per-request slowdown under concurrency",
    ),
)

# How a run ended, shown before what it measured.
_OUTCOME = (
    RunField("status", "", None, "How the run ended: one of the statuses below.", TEXT),
    RunField("http_status", "", None, "The HTTP status of the answer."),
    RunField(
        "reason",
        "",
        None,
        "Why a failed run failed, in our own words: one of key_refused, model_not_found, "
        "rate_limited, request_refused, server_failed, connect_timeout, no_first_token, "
        "stalled, too_slow, error_event, over_limit:<the limit passed>, malformed_stream, "
        "not_an_event_stream, unstorable, ended_inside_event, no_completion_marker, "
        "no_output, connection_failed. Never the provider's words (those are kept for "
        "staff only). Empty for an ok run.",
        TEXT,
    ),
    RunField("retry_after_s", "s", None, "How long the provider asked us to wait (429 or 503)."),
    RunField(
        "cold_connection",
        "",
        None,
        "The run opened a new connection (TCP and TLS setup inside its TTFT).",
        FLAG,
    ),
    RunField(
        "short_output",
        "",
        None,
        "Fewer than MIN_SPEED_TOKENS output tokens: left out of speed statistics.",
        FLAG,
    ),
    RunField(
        "read_path",
        "",
        None,
        "How the body was read: transport (the lean path, the connection's transport "
        "taken over: timestamps as bytes arrive) or aiter_raw (httpx's own iterator, "
        "the fallback when httpx internals are not as expected; slower per event). "
        "Empty when no stream was read.",
        TEXT,
    ),
    RunField(
        "loop_lag_first_ms",
        "ms",
        None,
        "How late our measuring loop was around the first output event (a 1 ms ticker's "
        "lag): the most the TTFT stamp may be late by.",
    ),
    RunField("loop_lag_max_ms", "ms", None, "Our measuring loop's worst lag during the read."),
    RunField(
        "client_bound",
        "",
        None,
        "Our client, not the provider, may have set the figures: the loop's lag at the "
        "first output event is over 5 ms, or the larger of both ends' lags is over 2 % of the "
        "output span of a run long enough to rank on speed (lags within the ticker's 1 ms "
        "excepted), or the speed is near the "
        "worker's own measured ceiling (its calibration). Left out of every statistic and "
        "alert, like an unusable run.",
        FLAG,
    ),
)

# Kept with the run for inspection, not shown as columns.
_RAW = (
    RunField(
        "error",
        "",
        None,
        "What went wrong, short, as the engine saw it: it may quote the provider or an "
        "internal server, so it is redacted, capped and shown to staff only (reason is "
        "the public verdict).",
        TEXT,
    ),
    RunField("usage", "", None, "The provider's usage object, last value.", JSON),
    RunField("server_timing", "", None, "Server timing as reported, keyed by source.", JSON),
    RunField(
        "timeline", "", None, "The chunk timeline: offsets (µs), channels, token counts.", JSON
    ),
)

# What the observatory judges of a run from its workload (probes/slots/judge.py,
# probes/kinds/checks.py) once the engine has measured it: stored and shown with the run, but
# not engine output (RunResult does not carry them).
_WORKLOAD = (
    RunField(
        "stopped_short",
        "",
        None,
        "Fewer than half the output tokens the workload's instruction asks for: kept, but "
        "left out of speed rankings (a short answer is not a speed).",
        FLAG,
    ),
    RunField(
        "output_valid",
        "",
        None,
        "Structured workloads: the answer parses as JSON and follows the schema "
        "(json-schema), or is a call of a defined tool whose arguments parse and follow its "
        "schema (tool-call). Empty when the workload checks nothing.",
        FLAG,
    ),
    RunField("check_detail", "", None, CHECK_DETAIL_TEXT, TEXT),
    RunField(
        "prompt_seed",
        "",
        None,
        "The seed the prompt was generated from (with the workload): the text is not "
        "stored, it is regenerated from this. Agent-loop steps after the first also carry "
        "the model's earlier answers.",
    ),
    RunField(
        "prompt_tokens_o200k",
        "tokens",
        None,
        "Our o200k count of the prompt we sent (input_tokens is the provider's, or the "
        "server's tokenizer's, count of the same prompt).",
    ),
)

RUN_FIELDS: dict[str, RunField] = {f.name: f for f in _MEASURED}
OUTCOME_FIELDS: dict[str, RunField] = {f.name: f for f in _OUTCOME}
RAW_FIELDS: dict[str, RunField] = {f.name: f for f in _RAW}
WORKLOAD_FIELDS: dict[str, RunField] = {f.name: f for f in _WORKLOAD}
# Everything the engine records per run (plus methodology_version).
ALL_RUN_FIELDS: dict[str, RunField] = {**OUTCOME_FIELDS, **RUN_FIELDS, **RAW_FIELDS}

# token_source values of counts that are the provider's own (usage), or of no count at
# all (a failed run). Any other source (a tokenize route, eval_count, o200k) is not the
# provider's count: pages mark it ≈, and rollups count the ok runs that carry one.
USAGE_TOKEN_SOURCES: tuple[str, ...] = ("", "usage")


def approx_tokens(token_source: str | None) -> bool:
    """The run's token counts are not the provider's usage."""
    return (token_source or "") not in USAGE_TOKEN_SOURCES


def answer_checked(status: str, output_valid: bool | None) -> bool:
    """An ok run whose answer the workload checked (valid or not): the denominator of
    the valid share. Failed runs have no answer; they count against availability."""
    return status == "ok" and output_valid is not None


# The metrics rollups keep as mergeable histograms per bucket: what leaderboards,
# history charts, /metrics and alerts aggregate.
ROLLUP_METRICS: tuple[str, ...] = (
    "ttft_ms",
    "ttfat_ms",
    "output_tps",
    "e2e_ms",
    "prefill_tps",
    # Workload headlines (a leaderboard column only for the workloads that have them,
    # probes/kinds/headline.headline_metrics): empty for every other workload.
    "first_sentence_ms",
    "tool_call_ms",
    "cold_ttft_ms",
    "ttft_saved_pct",
    "cost_saved_pct",
    "slowdown",
    # Self-hosted servers' side (empty for every other endpoint).
    "server_queue_ms",
    "energy_j_per_token",
    "output_tokens_per_j",
)
# Of those, the speeds: only runs that count for speed (not short_output) enter them.
SPEED_METRICS: tuple[str, ...] = tuple(m for m in ROLLUP_METRICS if RUN_FIELDS[m].speed)


# Which ok runs a metric's statistics take, written once for Python and for SQL: never a
# run our own client may have set (client_bound); for a speed, only runs long enough to
# rank (short_output, and a workload's stopped_short).
def counts_for_metric(
    metric: str, *, client_bound: bool, short_output: bool, stopped_short: bool | None
) -> bool:
    if client_bound:
        return False
    return metric not in SPEED_METRICS or not (short_output or stopped_short)


def left_out_sql(metric: str) -> str:
    """`counts_for_metric` negated, as SQL over probes_proberun's columns."""
    if metric in SPEED_METRICS:
        return "(client_bound OR short_output OR coalesce(stopped_short, false))"
    return "client_bound"
