"""What each number on the pages means, in one place.

The methodology page renders these; every column header, API field description and
Prometheus help text links to or reuses them, so a definition is written once. This is
the measurement contract's wording in the repository; the engine computes what it defines.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    unit: str
    definition: str
    better: str = "lower"  # "higher" or "lower": which way a ranking reads

    @property
    def anchor(self) -> str:
        return f"/methodology/#{self.name}"


METRICS: dict[str, Metric] = {
    m.name: m
    for m in [
        Metric(
            "output_tps",
            "Output speed",
            "tokens/s",
            "Output tokens per second after the first token: (output_tokens − tokens of the "
            "first output event) / (time of last output event − time of first). Excludes "
            "TTFT. Runs with fewer than MIN_SPEED_TOKENS output tokens are flagged "
            "short_output and left out of speed rankings.",
            better="higher",
        ),
        Metric(
            "ttft_ms",
            "TTFT",
            "ms",
            "Time to first token: request start → first output event of any channel. "
            "Reasoning counts, as in Artificial Analysis' definition. Measured on a warm "
            "connection unless the run is marked cold_connection.",
        ),
        Metric(
            "ttfat_ms",
            "First answer",
            "ms",
            "Time to first answer token: request start → first answer event (text or tool "
            "call), after any reasoning. Empty when no answer arrived.",
        ),
        Metric(
            "e2e_ms",
            "End-to-end",
            "ms",
            "Request start → end of stream (completion marker read, or connection closed): "
            "what a user waiting for the whole answer waits.",
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

# Per-run fields shown on run pages and in the API, with their contract definitions.
RUN_FIELDS: dict[str, str] = {
    "ttfb_ms": "Request start → response headers received.",
    "ttft_ms": METRICS["ttft_ms"].definition,
    "ttfat_ms": METRICS["ttfat_ms"].definition,
    "e2e_ms": METRICS["e2e_ms"].definition,
    "connect_ms": "DNS, TCP and TLS setup, timed separately; empty on a reused connection.",
    "output_tokens": "Tokens generated, reasoning included: the provider's usage figure "
    "when reported (last value); without usage, the server's own tokenizer when the "
    "endpoint names one; else our own o200k count. Pages mark counts not from usage ≈.",
    "token_source": "usage (the provider's count); llama.cpp, vllm or llama-cpp-python "
    "(the server's tokenize route counted the streamed text); ollama (its final "
    "eval_count); o200k (our count: can be far off the model's tokenizer).",
    "output_tokens_o200k": "Our count of all received output text with the o200k_base "
    "encoding, comparable across tokenizers; empty where output is hidden.",
    "output_tps": METRICS["output_tps"].definition,
    "output_tps_o200k": "Output speed computed with output_tokens_o200k.",
    "e2e_tps": "output_tokens / end-to-end time.",
    "itl_ms_p50": "Median gap between consecutive output events (chunk-level ITL).",
    "itl_ms_p95": "95th percentile gap between consecutive output events.",
    "itl_ms_p99": "99th percentile gap: read as stalls, dominated by VM wake-ups at speed.",
    "itl_ms_max": "Longest gap between consecutive output events.",
    "tpot_ms": "(time of last output − time of first output) / (output_tokens − 1).",
    "output_events": "Streamed chunks carrying output (answer, reasoning or tool call).",
    "tokens_per_event": "output_tokens / output_events: shows server-side batching.",
    "reasoning_tokens": "From the provider's usage details, when reported.",
    "input_tokens": "From usage.",
    "cached_input_tokens": "From usage.",
    "finish_reason": "As reported by the provider.",
    "cost_usd": "(input − cached) × input price + cached × cached price + output × output "
    "price, per million, with the prices in force at the run's time.",
    "provider_cost_usd": "The cost the provider itself reported, when it does.",
    "server_queue_ms": "Provider-reported queue time.",
    "server_prefill_ms": "Provider-reported prompt processing time.",
    "server_decode_ms": "Provider-reported generation time.",
    "server_total_ms": "Provider-reported total time.",
    "server_output_tps": "Provider-reported output speed.",
    "first_sentence_ms": "Request start → the output event that ends the first sentence "
    "(. ! or ? then a space or the end of the text): when a voice assistant can start "
    "speaking.",
    "tool_call_ms": "Request start → the last tool-call delta: when the call is complete "
    "and a client can act on it.",
    "output_valid": "Structured workloads: the answer parses as JSON and follows the "
    "schema (json-schema), or is a call of a defined tool whose arguments parse and "
    "follow its schema (tool-call). Empty when the workload checks nothing.",
    "check_detail": "Why an answer failed its check, e.g. which schema rule it broke.",
    "stopped_short": "Fewer than half the output tokens the workload's instruction asks "
    "for: kept, but left out of speed rankings (a short answer is not a speed).",
    "prompt_seed": "The seed the prompt was generated from (with the workload): the text "
    "is not stored, it is regenerated from this. Agent-loop steps after the first also "
    "carry the model's earlier answers.",
    "prompt_tokens_o200k": "Our o200k count of the prompt we sent (input_tokens is the "
    "provider's count of the same prompt).",
}

PERCENTILES = (5, 25, 50, 75, 95)

STATUS_MEANINGS: dict[str, str] = {
    "ok": "Completed with output.",
    "auth_error": "401/403: the key was refused.",
    "not_found": "404: the model is gone or misnamed.",
    "rate_limited": "429, with retry_after_s when the provider sends one.",
    "http_error": "Another 4xx answer.",
    "server_error": "5xx answer.",
    "timeout_connect": "No connection within the connect timeout.",
    "timeout_first_token": "Connected, but no output event within the first-token timeout.",
    "timeout_stall": "No event for longer than the stall limit mid-stream.",
    "timeout_total": "The whole request exceeded the total timeout.",
    "stream_error": "An error event inside a 200 stream.",
    "protocol_error": "Malformed SSE or JSON.",
    "truncated": "The stream ended without its completion marker.",
    "empty": "Completed with no output.",
    "network_error": "Refused, reset, or DNS failure.",
}

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
