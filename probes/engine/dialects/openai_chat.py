"""OpenAI-compatible chat completions (``/v1/chat/completions``), with the providers'
extensions: Groq's x_groq usage and timing, SambaNova's, OpenRouter's cost."""

from __future__ import annotations

from typing import Any

from .base import BodyRequest, Dialect, StreamRecorder, dict_of, int_or_none, text_of, tool_text

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
                    content = text_of(delta.get("content"))
                    if content is None and delta.get("refusal"):
                        content = text_of(delta.get("refusal"))
                    reasoning = text_of(delta.get("reasoning_content")) or text_of(
                        delta.get("reasoning")
                    )
                    calls = delta.get("tool_calls")
                    if calls:
                        tool = tool_text(calls, self)
                    elif delta.get("function_call"):
                        tool = tool_text([{"function": delta["function_call"]}], self)
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
        # Every kind of text the event carried counts against max_content_chars, whichever
        # one the timeline shows (1 MiB of tool arguments beside one character of content
        # was stored whole as an ok run).
        carried = len(tool) if tool is not None else 0
        if content is not None:
            piece = content if reasoning is None else reasoning + content
            self._output(t, idx, "a", piece, carried)
        elif tool is not None:
            self._output(t, idx, "t", tool, len(reasoning) if reasoning is not None else 0)
        elif reasoning is not None:
            self._output(t, idx, "r", reasoning)
        else:
            self._other(t)

    def normalized_usage(self) -> dict[str, Any] | None:
        return normalize_openai_usage(self.usage)


def normalize_openai_usage(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """OpenAI-style usage -> prompt/completion/total/reasoning/cached tokens and cost."""
    if not usage:
        return None
    details = dict_of(usage.get("completion_tokens_details"))
    prompt_details = dict_of(usage.get("prompt_tokens_details"))
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
    if cached is None:
        cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    cost = usage.get("cost")  # OpenRouter: credits, 1 credit = 1 USD
    return {
        "prompt_tokens": int_or_none(usage.get("prompt_tokens")),
        "completion_tokens": int_or_none(usage.get("completion_tokens")),
        "total_tokens": int_or_none(usage.get("total_tokens")),
        "reasoning_tokens": int_or_none(reasoning),
        "cached_tokens": int_or_none(cached),
        "cost": float(cost) if type(cost) in (int, float) else None,
    }


class OpenAIChatDialect(Dialect):
    def body(self, req: BodyRequest) -> dict[str, Any]:
        return {
            "model": req.model,
            "messages": req.messages,
            "max_tokens": req.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }


DIALECT = OpenAIChatDialect(
    name="openai-chat",
    title="OpenAI-compatible chat completions",
    path="/chat/completions",
    recorder=OpenAIChat,
)
