"""OpenAI responses (``/v1/responses``): typed events, no [DONE]."""

from __future__ import annotations

from typing import Any

from .base import BodyRequest, Dialect, StreamRecorder, dict_of, int_or_none


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
            response = dict_of(obj.get("response"))
            self.final_status = response.get("status")
            usage = dict_of(response.get("usage"))
            if usage:
                self.usage_events += 1
                self.usage = usage
            incomplete = dict_of(response.get("incomplete_details"))
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
        in_details = dict_of(usage.get("input_tokens_details"))
        out_details = dict_of(usage.get("output_tokens_details"))
        return {
            "prompt_tokens": int_or_none(usage.get("input_tokens")),
            "completion_tokens": int_or_none(usage.get("output_tokens")),
            "total_tokens": int_or_none(usage.get("total_tokens")),
            "reasoning_tokens": int_or_none(out_details.get("reasoning_tokens")),
            "cached_tokens": int_or_none(in_details.get("cached_tokens")),
            "cost": None,
        }


class OpenAIResponsesDialect(Dialect):
    def body(self, req: BodyRequest) -> dict[str, Any]:
        return {
            "model": req.model,
            "input": req.messages,
            "max_output_tokens": req.max_tokens,
            "stream": True,
        }


DIALECT = OpenAIResponsesDialect(
    name="openai-responses",
    title="OpenAI responses",
    path="/responses",
    recorder=OpenAIResponses,
)
