"""Every per-run metric of the methodology (/methodology/), computed from a recorded stream.

Called once, after the stream has ended (or failed), so the read loop never pays for
tokenising or sorting. A failed run goes through the same code and keeps whatever was
measured before the fault (TTFT, partial speed) - it is the status, not missing numbers,
that keeps failed runs out of the statistics.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from . import sanitize, tokens
from .contract import MIN_SPEED_TOKENS, PREFILL_MIN_TOKENS, counts_for_speed
from .dialects import StreamRecorder
from .request import Prices
from .result import RunResult

_OUTPUT = frozenset("art")
_ANSWER = frozenset("at")
_EVENT_TYPES_KEPT = 50
# A sentence ends at . ! or ? followed by whitespace, or at the end of the text so far
# (a speech engine can start speaking it then).
_SENTENCE_END = re.compile(r"[.!?](?:[\s\"')\]]|$)")


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = (len(sorted_values) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _ms(ns: int | float) -> float:
    return round(ns / 1e6, 3)


class ServerCount(NamedTuple):
    """Token counts by the server itself, for a stream without usage."""

    output: int
    method: str  # the token_source: one of tokenize.METHODS
    # The prompt's text by the tokenize route (None for Ollama's eval_count): the content
    # of the messages only, so a few tokens short of what the model saw (the chat
    # template's role markers are not in it).
    prompt: int | None = None


def prompt_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text of the prompt we sent: each message's content (system included), or the
    text parts of a content list."""
    texts = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [
                p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
            ]
    return texts


def fill_metrics(
    result: RunResult,
    rec: StreamRecorder,
    t0: int,
    t_end: int | None,
    *,
    streamed: bool,
    prices: Prices | None,
    include_text: bool,
    counts: tokens.Counts | None = None,
    min_speed_tokens: int = MIN_SPEED_TOKENS,
    server_count: ServerCount | None = None,
    prompt_tokens: int | None = None,
    timeline_max: int = 10_000,
) -> None:
    """Fill ``result``'s metric fields from the recorder's timeline.

    ``counts`` are the stream's o200k counts (see ``stream_counts``); computed here if
    not given. ``server_count`` is the server's own count (its tokenize route or
    Ollama's eval_count), used when the stream carried no usage (probes/engine/tokenize.py).
    ``prompt_tokens`` is our count of a fresh prompt (ProbeRequest.prompt_tokens), the
    prefill rate's token count when usage has none. ``timeline_max`` is the most points
    the stored timeline keeps (Limits.stored_timeline_entries; see ``compact_timeline``).
    """
    t, ch = rec.t, rec.ch
    out_idx = [i for i, c in enumerate(ch) if c in _OUTPUT]
    n_out = len(out_idx)
    answer_text = "".join(rec.answer_parts)
    reasoning_text = "".join(rec.reasoning_parts)
    if counts is None:
        counts = tokens.count_all(rec.pieces, answer_text, reasoning_text, "".join(rec.tool_parts))
    tok = counts.per_entry
    # Provider usage that cannot be true is not used at all (our own count stands in);
    # the reported object is kept with the reason, for whoever looks at the run.
    usage, usage_rejected = sanitize.plausible_usage(rec.normalized_usage())
    result.usage = (
        rec.usage if usage_rejected is None else {"rejected": usage_rejected, "reported": rec.usage}
    )
    result.server_timing = rec.server_timing or None
    result.finish_reason = rec.finish_reason
    if include_text:
        result.text = answer_text
        result.reasoning_text = reasoning_text

    if t_end is not None:
        result.e2e_ms = _ms(t_end - t0)
    if n_out:
        result.ttft_ms = _ms(t[out_idx[0]] - t0)
        first_answer = next((i for i in out_idx if ch[i] in _ANSWER), None)
        if first_answer is not None:
            result.ttfat_ms = _ms(t[first_answer] - t0)

    # Token counts --------------------------------------------------------------------
    reasoning_tokens = usage.get("reasoning_tokens") if usage else None
    hidden_reasoning = bool(reasoning_tokens) and not rec.reasoning_parts
    visible_o200k = counts.answer + counts.reasoning + counts.tool
    if streamed or n_out:
        # Hidden reasoning: our count sees only part of the output, so it is no count.
        result.output_tokens_o200k = None if hidden_reasoning else visible_o200k
        completion = usage.get("completion_tokens") if usage else None
        if completion is not None:
            result.output_tokens, result.token_source = completion, "usage"
        elif server_count is not None:
            result.output_tokens, result.token_source = server_count.output, server_count.method
        else:
            result.output_tokens, result.token_source = visible_o200k, "o200k"
    if usage:
        result.reasoning_tokens = reasoning_tokens
        result.input_tokens = usage.get("prompt_tokens")
        result.cached_input_tokens = usage.get("cached_tokens")
        result.provider_cost_usd = usage.get("cost")
    if result.input_tokens is None and server_count is not None:
        # No prompt count in usage: the same tokenizer's count of the prompt's text, so
        # the cost below has an input side from the same source as its output side.
        result.input_tokens = server_count.prompt
    result.output_events = n_out if (streamed or n_out) else None

    # Speed ---------------------------------------------------------------------------
    out_tokens = result.output_tokens
    if out_tokens is not None:
        result.short_output = not counts_for_speed(out_tokens, min_speed_tokens)
        if n_out:
            result.tokens_per_event = round(out_tokens / n_out, 4)
        if result.e2e_ms:
            result.e2e_tps = round(out_tokens / (result.e2e_ms / 1e3), 3)
    if n_out >= 2:
        span_ns = t[out_idx[-1]] - t[out_idx[0]]
        first_event_tokens = max(1, tok[out_idx[0]])
        # Tokens generated between the first and the last output event. Hidden reasoning
        # was generated before the first visible event (inside TTFT), so it is excluded,
        # as "excluding TTFT" intends; otherwise it would inflate the rate many times.
        decode_tokens = out_tokens
        if hidden_reasoning and out_tokens is not None:
            decode_tokens = out_tokens - reasoning_tokens
        if span_ns > 0:
            if decode_tokens is not None and decode_tokens - first_event_tokens > 0:
                result.output_tps = round((decode_tokens - first_event_tokens) / (span_ns / 1e9), 3)
            o200k = result.output_tokens_o200k
            if o200k is not None and o200k - first_event_tokens > 0:
                result.output_tps_o200k = round((o200k - first_event_tokens) / (span_ns / 1e9), 3)
            if decode_tokens is not None and decode_tokens > 1:
                result.tpot_ms = round(span_ns / 1e6 / (decode_tokens - 1), 4)
        gaps = sorted((t[b] - t[a]) / 1e6 for a, b in zip(out_idx, out_idx[1:], strict=False))
        result.itl_ms_p50 = round(percentile(gaps, 0.50), 3)
        result.itl_ms_p95 = round(percentile(gaps, 0.95), 3)
        result.itl_ms_p99 = round(percentile(gaps, 0.99), 3)
        result.itl_ms_max = round(gaps[-1], 3)

    # Cost ----------------------------------------------------------------------------
    if prices is not None and result.input_tokens is not None and out_tokens is not None:
        cached = result.cached_input_tokens or 0
        cached_price = (
            prices.cached_input_per_m
            if prices.cached_input_per_m is not None
            else prices.input_per_m
        )
        cost = (
            (result.input_tokens - cached) * prices.input_per_m
            + cached * cached_price
            + out_tokens * prices.output_per_m
        ) / 1e6
        result.cost_usd = round(cost, 10)

    fill_server_timing(result, rec.server_timing, usage)
    # The prompt's uncached share: from usage; without it, only a fresh prompt (nothing of
    # it can be cached) counts, by the server's tokenizer if it counted, else by ours.
    if usage and usage.get("prompt_tokens") is not None:
        uncached = uncached_prompt_tokens(result.input_tokens, result.cached_input_tokens)
    elif prompt_tokens is not None:
        uncached = result.input_tokens if result.input_tokens is not None else prompt_tokens
    else:
        uncached = None
    _fill_prefill(result, uncached, hidden_reasoning)
    _fill_task_timings(result, rec, t0)

    result.timeline = compact_timeline(
        [(t[i] - t0) // 1000 for i in out_idx],
        "".join(ch[i] for i in out_idx),
        [tok[i] for i in out_idx],
        timeline_max,
    )
    result.stream = {
        "sse_events": rec.n_events,
        "comment_lines": rec.comment_lines,
        "json_events": rec.json_events,
        "content_chunks": rec.content_chunks,
        "reasoning_chunks": rec.reasoning_chunks,
        "tool_chunks": rec.tool_chunks,
        "ping_events": rec.ping_events,
        "usage_events": rec.usage_events,
        # A provider names its event types: a few short ones are kept, not a flood.
        "event_types": sorted(name[:64] for name in rec.event_types)[:_EVENT_TYPES_KEPT],
        "first_output_event_index": rec.first_output_index,
        "first_answer_event_index": rec.first_answer_index,
        "error_event_index": rec.error_index,
        "completion_marker_seen": rec.done_seen,
        "final_status": rec.final_status,
        "usage_normalized": usage,
        "usage_rejected": usage_rejected,
        "hidden_reasoning": hidden_reasoning,
        **rec.provider_extra,
    }


def compact_timeline(t_us: list[int], ch: str, tok: list[int], most: int) -> dict[str, Any]:
    """The stored timeline: output events only, at most ``most`` points.

    Past ``most``, every ``merged`` neighbouring events become one point: the time of its
    last event (when all its tokens had arrived), the channel of its last event and the
    sum of its tokens. So no stored row grows with a stream's length; the run's metrics
    were computed from every event before this.
    """
    n = len(t_us)
    if n <= most:
        return {"t_us": t_us, "ch": ch, "tok": tok}
    merged = -(-n // most)  # ceil: events per point
    ends = [min(i + merged, n) - 1 for i in range(0, n, merged)]
    return {
        "t_us": [t_us[e] for e in ends],
        "ch": "".join(ch[e] for e in ends),
        "tok": [sum(tok[i : i + merged]) for i in range(0, n, merged)],
        "merged": merged,
    }


def uncached_prompt_tokens(input_tokens: int, cached_tokens: int | None) -> int | None:
    """The prompt tokens the provider had to process: usage's input less its cached share."""
    uncached = input_tokens - (cached_tokens or 0)
    return uncached if uncached >= 0 else None  # more cached than sent: not true


def prefill_rate(uncached_tokens: int | None, ms: float | None) -> float | None:
    """Prompt tokens per second over ``ms``; None below PREFILL_MIN_TOKENS, where the
    round trip inside the time outweighs the prompt's processing."""
    if uncached_tokens is None or uncached_tokens < PREFILL_MIN_TOKENS or not ms or ms <= 0:
        return None
    return round(uncached_tokens / (ms / 1e3), 3)


def _fill_prefill(result: RunResult, uncached: int | None, hidden_reasoning: bool) -> None:
    # Hidden reasoning is generated before the first visible event: that TTFT is not
    # prompt processing (the provider's own prompt time is, whatever the reasoning).
    if not hidden_reasoning:
        result.prefill_tps = prefill_rate(uncached, result.ttft_ms)
    result.server_prefill_tps = prefill_rate(uncached, result.server_prefill_ms)


def _fill_task_timings(result: RunResult, rec: StreamRecorder, t0: int) -> None:
    """When the first sentence ended (a voice turn) and when a tool call was complete."""
    t, ch, pieces = rec.t, rec.ch, rec.pieces
    for i, c in enumerate(ch):
        # A terminator at a piece's end counts at once: a speech engine would not wait
        # for the next piece (so "3." of "3.5" split across pieces counts too: rare).
        if c == "a" and _SENTENCE_END.search(pieces[i] or ""):
            result.first_sentence_ms = _ms(t[i] - t0)
            break
    if rec.tool_names:
        last_tool = max((i for i, c in enumerate(ch) if c == "t"), default=None)
        if last_tool is not None:
            result.tool_call_ms = _ms(t[last_tool] - t0)
        result.tool_calls = [
            {"name": name, "arguments": "".join(args)}
            for name, args in zip(rec.tool_names, rec.tool_args, strict=False)
        ]


async def stream_counts(rec: StreamRecorder) -> tokens.Counts:
    """The o200k counts of a recorded stream, computed without hogging the event loop."""
    return await tokens.count_all_async(
        rec.pieces,
        "".join(rec.answer_parts),
        "".join(rec.reasoning_parts),
        "".join(rec.tool_parts),
    )


def _f(value: Any) -> float | None:
    """A provider's number (or numeric string); None when absent, odd or not finite."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _s_to_ms(value: Any) -> float | None:
    v = _f(value)
    return None if v is None else round(v * 1e3, 3)


def fill_server_timing(
    result: RunResult, timing: dict[str, Any], usage: dict[str, Any] | None
) -> None:
    """Normalise the provider's own timing to milliseconds (raw object kept as is)."""
    completion = usage.get("completion_tokens") if usage else None
    # Raw provider objects: anything that is not the documented object is ignored.
    timing = {k: v for k, v in timing.items() if isinstance(v, dict)}
    seconds = timing.get("x_groq.usage") or timing.get("time_info")
    if seconds:  # Groq x_groq.usage and Cerebras time_info: seconds
        result.server_queue_ms = _s_to_ms(seconds.get("queue_time"))
        result.server_prefill_ms = _s_to_ms(seconds.get("prompt_time"))
        result.server_decode_ms = _s_to_ms(seconds.get("completion_time"))
        result.server_total_ms = _s_to_ms(seconds.get("total_time"))
        decode_s = _f(seconds.get("completion_time"))
        if completion and decode_s:
            result.server_output_tps = round(completion / decode_s, 3)
    elif "usage" in timing:  # SambaNova: seconds, server TTFT reported directly
        sn = timing["usage"]
        result.server_prefill_ms = _s_to_ms(sn.get("time_to_first_token"))
        result.server_total_ms = _s_to_ms(sn.get("total_latency"))
        if result.server_prefill_ms is not None and result.server_total_ms is not None:
            result.server_decode_ms = round(result.server_total_ms - result.server_prefill_ms, 3)
        tps = _f(sn.get("completion_tokens_after_first_per_sec"))
        result.server_output_tps = round(tps, 3) if tps is not None else None
    elif "timings" in timing:  # llama.cpp: milliseconds
        lc = timing["timings"]
        prompt_ms, predicted_ms = _f(lc.get("prompt_ms")), _f(lc.get("predicted_ms"))
        result.server_prefill_ms = round(prompt_ms, 3) if prompt_ms is not None else None
        result.server_decode_ms = round(predicted_ms, 3) if predicted_ms is not None else None
        if prompt_ms is not None and predicted_ms is not None:
            result.server_total_ms = round(prompt_ms + predicted_ms, 3)
        tps = _f(lc.get("predicted_per_second"))
        result.server_output_tps = round(tps, 3) if tps is not None else None
    elif "perf_metrics" in timing:  # Fireworks: header-style names, seconds
        pm = {str(k).replace("_", "-").lower(): v for k, v in timing["perf_metrics"].items()}
        result.server_prefill_ms = _s_to_ms(pm.get("server-time-to-first-token"))
        result.server_total_ms = _s_to_ms(pm.get("server-processing-time"))
        queue = [_f(v) for k, v in pm.items() if "queue" in k]
        if queue and None not in queue:
            result.server_queue_ms = round(sum(queue) * 1e3, 3)  # type: ignore[arg-type]
        if result.server_prefill_ms is not None and result.server_total_ms is not None:
            decode_ms = result.server_total_ms - result.server_prefill_ms
            result.server_decode_ms = round(decode_ms, 3)
            if completion and decode_ms > 0:
                result.server_output_tps = round(completion / (decode_ms / 1e3), 3)
