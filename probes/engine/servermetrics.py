"""A self-hosted server's own /metrics, read before and after a run (plain Python).

vLLM, llama.cpp, SGLang and TGI publish Prometheus text. Two scrapes around a run give
the server's side of it: queue, prefill and decode time from the histograms' sum and
count deltas over the window, and its load (running and waiting requests, KV-cache use,
prefix-cache hits). The window is *exact* when the server finished exactly our request
in it and ran or queued nothing else at either read (the deltas are our request's own
times, alone on the server), *shared* otherwise (the deltas are then means over every
request it finished, ours included, or ours under others' load).

    names = parse(text)                      # {sample name: [(labels, value), ...]}
    engine = detect(names)                   # "vllm" | "llama.cpp" | "sglang" | "tgi" | None
    window = server_window(engine, before, after, output_tokens, prompt_tokens)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[str, list[tuple[dict[str, str], float]]]

# Which metric names each engine publishes for what we read. Histograms are named by
# their family (``_sum`` and ``_count`` are read); gauges and counters by their sample.
# An engine without a figure has None, and ``lacks`` says so on the endpoint page.
_ENGINES: dict[str, dict[str, str | None]] = {
    "vllm": {
        "queue": "vllm:request_queue_time_seconds",
        "prefill": "vllm:request_prefill_time_seconds",
        "decode": "vllm:request_decode_time_seconds",
        "finished": "vllm:e2e_request_latency_seconds_count",
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
        "kv_cache": "vllm:kv_cache_usage_perc",  # 0..1 (older releases: gpu_cache_usage_perc)
        "prefix_hits": "vllm:prefix_cache_hits_total",
        "prefix_queries": "vllm:prefix_cache_queries_total",
    },
    "sglang": {
        "queue": "sglang:queue_time_seconds",
        "prefill": "sglang:time_to_first_token_seconds",
        "decode": None,
        "finished": "sglang:e2e_request_latency_seconds_count",
        "running": "sglang:num_running_reqs",
        "waiting": "sglang:num_queue_reqs",
        "kv_cache": "sglang:token_usage",
        "prefix_hits": None,
        "prefix_queries": None,
    },
    "tgi": {
        "queue": "tgi_request_queue_duration",
        "prefill": None,
        "decode": "tgi_request_inference_duration",
        "finished": "tgi_request_success",
        "running": "tgi_batch_current_size",
        "waiting": "tgi_queue_size",
        "kv_cache": None,
        "prefix_hits": None,
        "prefix_queries": None,
    },
    # llama.cpp has counters, not histograms: seconds and tokens in total, no request
    # count. Our request is taken as the only one when the tokens it predicted in the
    # window are ours (and the prompt tokens at most ours).
    "llama.cpp": {
        "queue": None,
        "prefill": "llamacpp:prompt_seconds_total",
        "decode": "llamacpp:tokens_predicted_seconds_total",
        "finished": None,
        "running": "llamacpp:requests_processing",
        "waiting": "llamacpp:requests_deferred",
        "kv_cache": "llamacpp:kv_cache_usage_ratio",
        "prefix_hits": None,
        "prefix_queries": None,
    },
}
_PREFIXES = (("vllm:", "vllm"), ("llamacpp:", "llama.cpp"), ("sglang:", "sglang"), ("tgi_", "tgi"))
ENGINES = tuple(_ENGINES)

# Why a figure can be missing, for the endpoint page.
_LACK_REASONS = {
    "queue": "queue time: the server publishes no queue-time histogram",
    "prefill": "prefill time: the server publishes no prefill-time metric",
    "decode": "decode time: the server publishes no decode-time metric",
    "kv_cache": "KV-cache use: not published",
    "prefix_hits": "prefix-cache hits: not published",
}


class MetricsError(ValueError):
    """The text is not Prometheus exposition format."""


def parse(text: str) -> Samples:
    """Every sample by name; raises MetricsError on text that is not Prometheus format."""
    out: Samples = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if math.isfinite(sample.value):
                    out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    except (ValueError, TypeError, IndexError) as exc:
        raise MetricsError(f"not Prometheus text: {str(exc)[:120]}") from None
    return out


def detect(samples: Samples) -> str | None:
    """The engine whose metric names these are (vLLM, llama.cpp, SGLang, TGI), else None."""
    for name in samples:
        for prefix, engine in _PREFIXES:
            if name.startswith(prefix):
                return engine
    return None


def lacks(engine: str | None) -> list[str]:
    """The server-side figures an engine's /metrics cannot give, with why."""
    if engine is None:
        return ["all server-side figures: no /metrics with names of vLLM, llama.cpp, SGLang or TGI"]
    roles = _ENGINES[engine]
    return [why for role, why in _LACK_REASONS.items() if roles.get(role) is None]


def series(samples: Samples, name: str) -> list[tuple[dict[str, str], float]]:
    """A sample's label sets and values. The parser names a counter's samples ``_total``
    whether the exporter wrote the suffix (vLLM) or not (DCGM): both are found."""
    return samples.get(name) or samples.get(name + "_total") or []


def _total(samples: Samples, name: str | None) -> float | None:
    """The sum over every label set (all models and GPUs of the server)."""
    found = series(samples, name) if name is not None else []
    return sum(value for _, value in found) if found else None


@dataclass
class ServerWindow:
    """The server's side of one run, from two scrapes around it."""

    engine: str
    window: str = ""  # "exact" or "shared" ("" when the server finished nothing in it)
    finished: float | None = None  # requests the server finished in the window
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    running: float | None = None  # the higher of the two scrapes: the load we met
    waiting: float | None = None
    kv_cache_pct: float | None = None
    prefix_hit_pct: float | None = None
    lacks: list[str] = field(default_factory=list)


def _mean_ms(before: Samples, after: Samples, family: str | None, count: float | None):
    """(sum delta / count delta) in ms for a histogram; a counter of seconds over ``count``."""
    if family is None:
        return None
    if family.endswith("_total"):  # llama.cpp: a seconds counter
        s0, s1 = _total(before, family), _total(after, family)
        if s0 is None or s1 is None or s1 < s0:
            return None
        return round((s1 - s0) * 1e3, 3)
    s0, s1 = _total(before, family + "_sum"), _total(after, family + "_sum")
    c0, c1 = _total(before, family + "_count"), _total(after, family + "_count")
    if None in (s0, s1, c0, c1) or c1 <= c0 or s1 < s0:  # type: ignore[operator]
        return None  # nothing finished in the window, or the server restarted
    return round((s1 - s0) / (c1 - c0) * 1e3, 3)  # type: ignore[operator]


def _higher(before: Samples, after: Samples, name: str | None) -> float | None:
    values = [v for v in (_total(before, name), _total(after, name)) if v is not None]
    return max(values) if values else None


def _delta(before: Samples, after: Samples, name: str | None) -> float | None:
    a, b = _total(before, name), _total(after, name)
    return None if a is None or b is None or b < a else b - a


def server_window(
    engine: str,
    before: Samples,
    after: Samples,
    output_tokens: int | None = None,
    prompt_tokens: int | None = None,
) -> ServerWindow:
    """The server's figures for the window between the two scrapes (our run inside it)."""
    roles = _ENGINES[engine]
    out = ServerWindow(engine=engine, lacks=lacks(engine))
    finished_name = roles["finished"]
    if finished_name is None and roles["prefill"] is not None:
        finished_name = (roles["prefill"] or "") + "_count"
    out.finished = _delta(before, after, finished_name)
    if engine == "llama.cpp":
        predicted = _delta(before, after, "llamacpp:tokens_predicted_total")
        prompt = _delta(before, after, "llamacpp:prompt_tokens_total")
        ours = predicted is not None and output_tokens is not None and predicted == output_tokens
        ours = ours and (prompt is None or prompt_tokens is None or prompt <= prompt_tokens)
        out.finished = 1.0 if ours else None
        out.window = "exact" if ours else ("shared" if predicted else "")
    elif out.finished:
        out.window = "exact" if out.finished == 1 else "shared"
    others = [_higher(before, after, roles[g]) for g in ("running", "waiting")]
    if out.window == "exact" and any(others):
        # Ours is the only one finished, but another ran or waited beside it: it shared
        # the batch, so these are our times under someone else's load.
        out.window = "shared"
    count = out.finished
    out.queue_ms = _mean_ms(before, after, roles["queue"], count)
    out.prefill_ms = _mean_ms(before, after, roles["prefill"], count)
    out.decode_ms = _mean_ms(before, after, roles["decode"], count)
    if engine == "sglang" and out.prefill_ms is not None and out.queue_ms is not None:
        # SGLang's TTFT histogram holds the queue wait as well: prefill is the rest.
        out.prefill_ms = round(max(0.0, out.prefill_ms - out.queue_ms), 3)
    if engine == "llama.cpp" and out.window == "shared":
        out.prefill_ms = out.decode_ms = None  # totals of several requests, not ours
    out.running = _higher(before, after, roles["running"])
    out.waiting = _higher(before, after, roles["waiting"])
    kv = _higher(before, after, roles["kv_cache"])
    out.kv_cache_pct = None if kv is None else round(kv * 100, 2)
    hits = _delta(before, after, roles["prefix_hits"])
    queries = _delta(before, after, roles["prefix_queries"])
    if hits is not None and queries:
        out.prefix_hit_pct = round(100 * hits / queries, 2)
    return out
