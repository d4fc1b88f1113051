"""One measured run, with every per-run field of the methodology under its name."""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from .contract import METHODOLOGY_VERSION, RETRYABLE_STATUSES

# Fields left out of to_dict(): bulky (text) or process-local (t0_ns).
_TEXT_FIELDS = ("text", "reasoning_text")
_PRIVATE_FIELDS = ("t0_ns",)


@dataclass
class RunResult:
    status: str = "ok"
    http_status: int | None = None
    error: str | None = None  # short, human-readable; may quote the provider: staff only
    reason: str | None = None  # our verdict's words (reasons.py): what public surfaces show
    error_detail: Any = None  # the provider's error object, when it sent one
    retry_after_s: float | None = None
    rate_limit: dict[str, Any] | None = None  # x-ratelimit-* / anthropic-ratelimit-*

    api: str | None = None
    model: str | None = None
    started_at: dt.datetime | None = None  # wall clock, UTC, for storage only
    methodology_version: int = METHODOLOGY_VERSION

    connect_ms: float | None = None
    cold_connection: bool | None = None
    ttfb_ms: float | None = None
    ttft_ms: float | None = None
    ttfat_ms: float | None = None
    e2e_ms: float | None = None
    prefill_tps: float | None = None  # uncached prompt tokens / TTFT (metrics.prefill_rate)

    output_tokens: int | None = None
    # "usage", the server's tokenizer ("llama.cpp", "vllm", "llama-cpp-python", "ollama")
    # when the stream had no usage, else "o200k" (our count).
    token_source: str | None = None
    output_tokens_o200k: int | None = None
    output_tps: float | None = None
    output_tps_o200k: float | None = None
    e2e_tps: float | None = None
    itl_ms_p50: float | None = None
    itl_ms_p95: float | None = None
    itl_ms_p99: float | None = None
    itl_ms_max: float | None = None
    tpot_ms: float | None = None
    output_events: int | None = None
    tokens_per_event: float | None = None
    short_output: bool | None = None
    read_path: str | None = None  # "transport" (fastread.py) or "aiter_raw" (fallback)
    # Our measuring loop's lateness while reading (loop_lag.py); client_bound: it could
    # have moved the TTFT or speed past the methodology's bounds (left out of statistics).
    loop_lag_first_ms: float | None = None
    loop_lag_max_ms: float | None = None
    client_bound: bool | None = None
    first_sentence_ms: float | None = None  # t0 -> the answer's first sentence end
    tool_call_ms: float | None = None  # t0 -> the last tool-call delta (the call complete)
    tool_calls: list[dict[str, str]] | None = None  # [{"name", "arguments"}] as streamed
    # A run group's own figures, set by its kind (probes/kinds/) on its summary (never the engine).
    cold_ttft_ms: float | None = None
    ttft_saved_pct: float | None = None
    cost_saved_pct: float | None = None
    slowdown: float | None = None

    reasoning_tokens: int | None = None
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    finish_reason: str | None = None
    cost_usd: float | None = None
    provider_cost_usd: float | None = None

    server_queue_ms: float | None = None
    server_prefill_ms: float | None = None
    server_decode_ms: float | None = None
    server_total_ms: float | None = None
    server_output_tps: float | None = None
    server_prefill_tps: float | None = None
    # A self-hosted server's /metrics and power counter around the run (telemetry.py).
    server_window: str | None = None  # "per-request", "exact" or "shared"
    server_running_requests: float | None = None
    server_waiting_requests: float | None = None
    server_kv_cache_pct: float | None = None
    server_prefix_hit_pct: float | None = None
    network_rtt_ms: float | None = None  # the TCP handshake (DNS included)
    tls_ms: float | None = None
    energy_j: float | None = None
    energy_j_per_token: float | None = None
    output_tokens_per_j: float | None = None
    tps_per_w: float | None = None
    energy_above_idle_j: float | None = None
    output_tokens_per_j_above_idle: float | None = None
    energy_window: str | None = None  # "exact" or "shared"

    usage: dict[str, Any] | None = None  # the provider's object, last value
    server_timing: dict[str, Any] | None = None  # raw, keyed by where it came from
    stream: dict[str, Any] | None = None  # parser facts: event counts, indexes, marker
    timeline: dict[str, Any] | None = None  # {"t_us": [...], "ch": "...", "tok": [...]}
    text: str | None = None
    reasoning_text: str | None = None
    t0_ns: int | None = field(default=None, repr=False)  # perf_counter_ns at t0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def retryable(self) -> bool:
        return self.status in RETRYABLE_STATUSES

    def to_dict(self, include_text: bool = False) -> dict[str, Any]:
        """The JSON object of ``measure --json`` (JSON-able: datetimes as ISO 8601)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            name = f.name
            if name in _PRIVATE_FIELDS or (name in _TEXT_FIELDS and not include_text):
                continue
            value = getattr(self, name)
            if isinstance(value, dt.datetime):
                value = value.isoformat()
            out[name] = value
        return out
