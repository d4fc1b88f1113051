"""What each provider's stream means: output events, usage, server timing, errors.

A dialect receives the SSE parser's events (``on_event``) and comments (``on_comment``)
and records, per timeline entry, the read timestamp, a one-letter channel and the output
text of that entry. Everything else (tokens, rates, percentiles) is computed after the
stream by ``metrics.py``, so the per-event work here stays at one ``orjson.loads`` and a
few dict lookups.

Channels (metrics.md "output event"): ``a`` answer text, ``r`` reasoning text, ``t``
tool-call delta, ``o`` anything else (role-only, empty strings, usage-only, pings,
comments, errors), ``d`` the completion marker.
"""

from __future__ import annotations

from typing import Any

import orjson

_loads = orjson.loads
_JSONError = orjson.JSONDecodeError


class StreamRecorder:
    """Timeline and facts of one stream; the dialects below fill it in."""

    api = "base"

    def __init__(self) -> None:
        self.t: list[int] = []  # perf_counter_ns of the read that delivered each entry
        self.ch: list[str] = []  # channel per entry
        self.pieces: list[str | None] = []  # output text per entry (None if not output)
        self.answer_parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.tool_parts: list[str] = []
        self.tool_names: list[str] = []  # one per tool call, in order (tool-call checks)
        self.tool_args: list[list[str]] = []  # argument fragments per call
        self.eval_count: int | None = None  # Ollama's generated-token count, final chunk

        self.n_events = 0  # dispatched SSE events (comments excluded)
        self.comment_lines = 0
        self.json_events = 0
        self.ping_events = 0
        self.usage_events = 0
        self.event_types: set[str] = set()
        self.first_output_index: int | None = None  # index among dispatched events
        self.first_answer_index: int | None = None
        self.first_output_t: int | None = None
        self.last_output_t: int | None = None

        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None  # the provider's object, last value
        self.server_timing: dict[str, Any] = {}
        self.provider_extra: dict[str, Any] = {}
        self.error: Any = None  # the provider's error object
        self.error_index: int | None = None
        self.error_t: int | None = None
        self.protocol_error: str | None = None
        self.done_seen = False  # completion marker ([DONE], message_stop, response.completed)
        self.marker_t: int | None = None
        self.finished = False  # stop reading: marker seen or the stream cannot continue
        self.final_status: str | None = None

    # -- helpers used by the dialects -------------------------------------------------

    def on_comment(self, t: int) -> None:
        self.comment_lines += 1
        self.t.append(t)
        self.ch.append("o")
        self.pieces.append(None)

    # Chunks that carried each kind of output: one part is kept per chunk.
    @property
    def content_chunks(self) -> int:
        return len(self.answer_parts)

    @property
    def reasoning_chunks(self) -> int:
        return len(self.reasoning_parts)

    @property
    def tool_chunks(self) -> int:
        return len(self.tool_parts)

    def _other(self, t: int) -> None:
        self.t.append(t)
        self.ch.append("o")
        self.pieces.append(None)

    def _output(self, t: int, idx: int, ch: str, piece: str) -> None:
        self.t.append(t)
        self.ch.append(ch)
        self.pieces.append(piece)
        if self.first_output_index is None:
            self.first_output_index = idx
            self.first_output_t = t
        if ch != "r" and self.first_answer_index is None:
            self.first_answer_index = idx
        self.last_output_t = t

    def _marker(self, t: int) -> None:
        self.t.append(t)
        self.ch.append("d")
        self.pieces.append(None)
        self.done_seen = True
        self.marker_t = t
        self.finished = True

    def _fail_protocol(self, t: int, message: str) -> None:
        self._other(t)
        self.protocol_error = message
        self.finished = True

    def _set_error(self, err: Any, idx: int, t: int) -> None:
        if self.error is None:
            self.error = err
            self.error_index = idx
            self.error_t = t

    def _parse(self, data: bytes, idx: int, t: int) -> dict[str, Any] | None:
        try:
            obj = _loads(data)
        except _JSONError as exc:
            self._fail_protocol(t, f"malformed JSON in SSE event {idx}: {exc}")
            return None
        if type(obj) is not dict:
            self._fail_protocol(t, f"SSE event {idx} is JSON but not an object")
            return None
        self.json_events += 1
        return obj

    # -- what the client and metrics read afterwards ---------------------------------

    def complete(self, incomplete_tail: bool) -> bool:
        """Did the stream end as the protocol says a stream ends?

        A completion marker is enough. Without one (TGI, some proxies), a finish_reason
        followed by end of stream at an event boundary is a complete stream too.
        """
        if self.error is not None or self.protocol_error is not None:
            return False
        if self.done_seen:
            return True
        return self.finish_reason is not None and not incomplete_tail

    def normalized_usage(self) -> dict[str, Any] | None:  # pragma: no cover - overridden
        return None

    def on_event(self, name: bytes | None, data: bytes, t: int) -> None:  # pragma: no cover
        raise NotImplementedError


def _text(value: Any) -> str | None:
    """A delta's text: a non-empty string, or the text parts of a list of parts."""
    if type(value) is str:
        return value or None
    if isinstance(value, list):  # some servers stream content as [{type, text}]
        joined = "".join(_str(p.get("text")) for p in value if type(p) is dict)
        return joined or None
    return None


def _str(value: Any) -> str:
    return value if type(value) is str else ""


def _tool_text(calls: Any, rec: StreamRecorder | None = None) -> str | None:
    """Text of a tool-call delta (name + argument fragment), for token counting.

    With ``rec``, each call's name and argument fragments are kept too (by the call's
    ``index``), so the complete call can be checked after the stream.
    """
    if not isinstance(calls, list) or not calls:
        return None
    out = []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            name, args = _str(fn.get("name")), _str(fn.get("arguments"))
            out.append(name)
            out.append(args)
            if rec is not None:
                _keep_call(rec, call.get("index"), name, args)
    return "".join(out) or None


def _keep_call(rec: StreamRecorder, index: Any, name: str, args: str) -> None:
    if type(index) is int and 0 <= index < 64:
        while len(rec.tool_names) <= index:
            rec.tool_names.append("")
            rec.tool_args.append([])
        if name and not rec.tool_names[index]:
            rec.tool_names[index] = name
        rec.tool_args[index].append(args)
        return
    if name or not rec.tool_names:  # legacy function_call: one call, no index
        rec.tool_names.append(name)
        rec.tool_args.append([])
    rec.tool_args[-1].append(args)


_GROQ_TIMING = ("queue_time", "prompt_time", "completion_time", "total_time")
_SAMBANOVA_TIMING = (
    "time_to_first_token",
    "end_time",
    "start_time",
    "total_latency",
    "total_tokens_per_sec",
    "completion_tokens_per_sec",
    "completion_tokens_after_first_per_sec",
    "completion_tokens_after_first_per_sec_first_ten",
)


class OpenAIChat(StreamRecorder):
    """``/v1/chat/completions`` with stream=true, and the providers' extensions."""

    api = "openai-chat"

    def on_event(self, name: bytes | None, data: bytes, t: int) -> None:
        if self.finished:
            return
        idx = self.n_events
        self.n_events += 1
        if name is not None:
            self.event_types.add(name.decode("utf-8", "replace"))
        if data[:1] == b"[" and data.strip() == b"[DONE]":
            self._marker(t)
            return
        obj = self._parse(data, idx, t)
        if obj is None:
            return
        err = obj.get("error")
        if err:
            # A 200 stream can still fail: an error object replaces the chunk.
            self._set_error(err, idx, t)
            self._other(t)
            return
        content = reasoning = tool = None
        choices = obj.get("choices")
        if choices and type(choices) is list:
            choice = choices[0]
            if type(choice) is dict:
                delta = choice.get("delta")
                if delta and type(delta) is dict:
                    content = _text(delta.get("content"))
                    if content is None and delta.get("refusal"):
                        content = _text(delta.get("refusal"))
                    reasoning = _text(delta.get("reasoning_content")) or _text(
                        delta.get("reasoning")
                    )
                    calls = delta.get("tool_calls")
                    if calls:
                        tool = _tool_text(calls, self)
                    elif delta.get("function_call"):
                        tool = _tool_text([{"function": delta["function_call"]}], self)
                finish = choice.get("finish_reason")
                if finish:  # "" is treated like null
                    self.finish_reason = finish
                    eval_count = obj.get("eval_count")  # Ollama: only on its final chunk
                    if type(eval_count) is int:
                        self.eval_count = eval_count
        usage = obj.get("usage")
        xgroq = obj.get("x_groq")
        if xgroq and type(xgroq) is dict:
            xg_usage = xgroq.get("usage")
            if xg_usage and type(xg_usage) is dict:
                timing = {k: xg_usage[k] for k in _GROQ_TIMING if k in xg_usage}
                if timing:
                    self.server_timing["x_groq.usage"] = timing
                if not usage:  # older Groq responses had usage only here
                    usage = xg_usage
            if xgroq.get("id"):
                self.provider_extra["x_groq_id"] = str(xgroq["id"])[:200]
        if usage and type(usage) is dict:
            # Several providers send running totals: the last value wins.
            self.usage_events += 1
            self.usage = usage
            if "time_to_first_token" in usage or "total_latency" in usage:
                timing = {k: usage[k] for k in _SAMBANOVA_TIMING if k in usage}
                self.server_timing["usage"] = timing
        if "time_info" in obj and obj["time_info"]:
            self.server_timing["time_info"] = obj["time_info"]
        if "timings" in obj and obj["timings"]:
            self.server_timing["timings"] = obj["timings"]
        if "perf_metrics" in obj and obj["perf_metrics"]:
            self.server_timing["perf_metrics"] = obj["perf_metrics"]

        if content is not None:
            self.answer_parts.append(content)
        if reasoning is not None:
            self.reasoning_parts.append(reasoning)
        if tool is not None:
            self.tool_parts.append(tool)
        if content is not None:
            piece = content if reasoning is None else reasoning + content
            self._output(t, idx, "a", piece)
        elif tool is not None:
            self._output(t, idx, "t", tool)
        elif reasoning is not None:
            self._output(t, idx, "r", reasoning)
        else:
            self._other(t)

    def normalized_usage(self) -> dict[str, Any] | None:
        return normalize_openai_usage(self.usage)


def _dict(value: Any) -> dict[str, Any]:
    """A provider's object where one is expected; anything else reads as empty."""
    return value if type(value) is dict else {}


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


def normalize_openai_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """OpenAI-style usage -> prompt/completion/total/reasoning/cached tokens and cost."""
    if not usage:
        return None
    details = _dict(usage.get("completion_tokens_details"))
    prompt_details = _dict(usage.get("prompt_tokens_details"))
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    cost = usage.get("cost")  # OpenRouter: credits, 1 credit = 1 USD
    return {
        "prompt_tokens": _int_or_none(usage.get("prompt_tokens")),
        "completion_tokens": _int_or_none(usage.get("completion_tokens")),
        "total_tokens": _int_or_none(usage.get("total_tokens")),
        "reasoning_tokens": _int_or_none(reasoning),
        "cached_tokens": _int_or_none(cached),
        "cost": float(cost) if type(cost) in (int, float) else None,
    }


class AnthropicMessages(StreamRecorder):
    """``/v1/messages`` with stream=true: message_start ... message_stop."""

    api = "anthropic-messages"

    def __init__(self) -> None:
        super().__init__()
        self._provisional_output: int | None = None
        self._delta_usage_seen = False

    def on_event(self, name: bytes | None, data: bytes, t: int) -> None:
        if self.finished:
            return
        idx = self.n_events
        self.n_events += 1
        if name is not None:
            self.event_types.add(name.decode("utf-8", "replace"))
        obj = self._parse(data, idx, t)
        if obj is None:
            return
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = _dict(obj.get("delta"))
            dtype = delta.get("type")
            if dtype == "text_delta":
                text = delta.get("text")
                if text and type(text) is str:
                    self.answer_parts.append(text)
                    self._output(t, idx, "a", text)
                    return
            elif dtype == "thinking_delta":
                text = delta.get("thinking")
                if text and type(text) is str:
                    self.reasoning_parts.append(text)
                    self._output(t, idx, "r", text)
                    return
            elif dtype == "input_json_delta":
                text = delta.get("partial_json")
                if text and type(text) is str:
                    self.tool_parts.append(text)
                    if self.tool_args:
                        self.tool_args[-1].append(text)
                    self._output(t, idx, "t", text)
                    return
            # signature_delta, citations_delta and empty deltas carry no output.
            self._other(t)
        elif kind == "message_start":
            usage = _dict(_dict(obj.get("message")).get("usage"))
            if usage:
                self.usage_events += 1
                self.usage = dict(usage)
                self._provisional_output = _int_or_none(usage.get("output_tokens"))
            self._other(t)
        elif kind == "message_delta":
            delta = _dict(obj.get("delta"))
            if delta.get("stop_reason"):
                self.finish_reason = delta["stop_reason"]
            usage = _dict(obj.get("usage"))
            if usage:
                # Cumulative, not additive: overlay the latest values.
                self.usage_events += 1
                merged = dict(self.usage or {})
                merged.update(usage)
                self.usage = merged
                self._delta_usage_seen = True
            self._other(t)
        elif kind == "message_stop":
            self._marker(t)
        elif kind == "ping":
            self.ping_events += 1
            self._other(t)
        elif kind == "error":
            self._set_error(obj.get("error") or obj, idx, t)
            self._other(t)
        else:  # content_block_start / content_block_stop / future types
            if kind == "content_block_start":
                block = obj.get("content_block") or {}
                if block.get("type") == "tool_use":
                    self.tool_names.append(str(block.get("name") or ""))
                    self.tool_args.append([])
            self._other(t)

    def normalized_usage(self) -> dict[str, Any] | None:
        usage = self.usage
        if not usage:
            return None
        raw_input = _int_or_none(usage.get("input_tokens"))
        cache_read = _int_or_none(usage.get("cache_read_input_tokens"))
        cache_creation = _int_or_none(usage.get("cache_creation_input_tokens"))
        # Anthropic's input_tokens excludes cache reads and writes; metrics.md's
        # input_tokens is the whole prompt, of which `cached` were cache hits.
        prompt = None
        if raw_input is not None:
            prompt = raw_input + (cache_read or 0) + (cache_creation or 0)
        details = _dict(usage.get("output_tokens_details"))
        completion = _int_or_none(usage.get("output_tokens")) if self._delta_usage_seen else None
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": None,
            "reasoning_tokens": _int_or_none(details.get("thinking_tokens")),
            "cached_tokens": cache_read,
            "cache_creation_input_tokens": cache_creation,
            # message_start's output_tokens is a placeholder; it is only worth
            # reporting when the stream died before any message_delta.
            "completion_tokens_provisional_from_message_start": (
                None if self._delta_usage_seen else self._provisional_output
            ),
            "cost": None,
        }


class OpenAIResponses(StreamRecorder):
    """``/v1/responses`` with stream=true (typed events, no [DONE])."""

    api = "openai-responses"

    _ANSWER = ("response.output_text.delta", "response.refusal.delta")
    _REASONING = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta")
    _TOOL = ("response.function_call_arguments.delta", "response.custom_tool_call_input.delta")
    _END = ("response.completed", "response.incomplete", "response.failed")

    def on_event(self, name: bytes | None, data: bytes, t: int) -> None:
        if self.finished:
            return
        idx = self.n_events
        self.n_events += 1
        if name is not None:
            self.event_types.add(name.decode("utf-8", "replace"))
        obj = self._parse(data, idx, t)
        if obj is None:
            return
        kind = obj.get("type")
        delta = obj.get("delta")
        if type(delta) is not str:
            delta = None
        if kind in self._ANSWER and delta:
            self.answer_parts.append(delta)
            self._output(t, idx, "a", delta)
        elif kind in self._REASONING and delta:
            self.reasoning_parts.append(delta)
            self._output(t, idx, "r", delta)
        elif kind in self._TOOL and delta:
            self.tool_parts.append(delta)
            self._output(t, idx, "t", delta)
        elif kind in self._END:
            response = _dict(obj.get("response"))
            self.final_status = response.get("status")
            usage = _dict(response.get("usage"))
            if usage:
                self.usage_events += 1
                self.usage = usage
            incomplete = _dict(response.get("incomplete_details"))
            self.finish_reason = incomplete.get("reason") or self.final_status
            if kind == "response.failed":
                self._set_error(response.get("error") or {"message": "response.failed"}, idx, t)
            self._marker(t)
        elif kind == "error":
            self._set_error(obj.get("error") or obj, idx, t)
            self._other(t)
        else:
            self._other(t)

    def normalized_usage(self) -> dict[str, Any] | None:
        usage = self.usage
        if not usage:
            return None
        in_details = _dict(usage.get("input_tokens_details"))
        out_details = _dict(usage.get("output_tokens_details"))
        return {
            "prompt_tokens": _int_or_none(usage.get("input_tokens")),
            "completion_tokens": _int_or_none(usage.get("output_tokens")),
            "total_tokens": _int_or_none(usage.get("total_tokens")),
            "reasoning_tokens": _int_or_none(out_details.get("reasoning_tokens")),
            "cached_tokens": _int_or_none(in_details.get("cached_tokens")),
            "cost": None,
        }


DIALECTS: dict[str, type[StreamRecorder]] = {
    OpenAIChat.api: OpenAIChat,
    AnthropicMessages.api: AnthropicMessages,
    OpenAIResponses.api: OpenAIResponses,
}


def new_recorder(api: str) -> StreamRecorder:
    try:
        return DIALECTS[api]()
    except KeyError:
        raise ValueError(f"unknown api {api!r}; expected one of {sorted(DIALECTS)}") from None
