"""Anthropic messages (``/v1/messages``): typed events, message_start ... message_stop."""

from __future__ import annotations

from typing import Any

from .base import BodyRequest, Dialect, StreamRecorder, dict_of, int_or_none

ANTHROPIC_VERSION = "2023-06-01"


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
            delta = dict_of(obj.get("delta"))
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
            usage = dict_of(dict_of(obj.get("message")).get("usage"))
            if usage:
                self.usage_events += 1
                self.usage = dict(usage)
                self._provisional_output = int_or_none(usage.get("output_tokens"))
            self._other(t)
        elif kind == "message_delta":
            delta = dict_of(obj.get("delta"))
            if delta.get("stop_reason"):
                self.finish_reason = delta["stop_reason"]
            usage = dict_of(obj.get("usage"))
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
                block = dict_of(obj.get("content_block"))
                if block.get("type") == "tool_use":
                    self.new_call(str(block.get("name") or ""))
            self._other(t)

    def normalized_usage(self) -> dict[str, Any] | None:
        usage = self.usage
        if not usage:
            return None
        raw_input = int_or_none(usage.get("input_tokens"))
        cache_read = int_or_none(usage.get("cache_read_input_tokens"))
        cache_creation = int_or_none(usage.get("cache_creation_input_tokens"))
        # Anthropic's input_tokens excludes cache reads and writes; metrics.md's
        # input_tokens is the whole prompt, of which `cached` were cache hits.
        prompt = None
        if raw_input is not None:
            prompt = raw_input + (cache_read or 0) + (cache_creation or 0)
        details = dict_of(usage.get("output_tokens_details"))
        completion = int_or_none(usage.get("output_tokens")) if self._delta_usage_seen else None
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": None,
            "reasoning_tokens": int_or_none(details.get("thinking_tokens")),
            "cached_tokens": cache_read,
            "cache_creation_input_tokens": cache_creation,
            # message_start's output_tokens is a placeholder; it is only worth
            # reporting when the stream died before any message_delta.
            "completion_tokens_provisional_from_message_start": (
                None if self._delta_usage_seen else self._provisional_output
            ),
            "cost": None,
        }


class AnthropicDialect(Dialect):
    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def body(self, req: BodyRequest) -> dict[str, Any]:
        system = [m["content"] for m in req.messages if m.get("role") == "system"]
        body: dict[str, Any] = {
            "model": req.model,
            "messages": [m for m in req.messages if m.get("role") != "system"],
            "max_tokens": req.max_tokens,
            "stream": True,
        }
        if system:
            body["system"] = "\n\n".join(str(s) for s in system)
        return body

    def structured_body(
        self, schema: dict[str, Any] | None = None, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        if tools:
            return {
                "tools": [
                    {
                        "name": t["name"],
                        "description": t.get("description", ""),
                        "input_schema": t.get("parameters") or {"type": "object"},
                    }
                    for t in tools
                ],
                "tool_choice": {"type": "any"},  # the answer must be a call
            }
        if schema is not None:
            # The generally available form (no beta header): the beta's top-level
            # `output_format` with `anthropic-beta: structured-outputs-2025-11-13` is only
            # accepted for a transition period. The schema must set additionalProperties
            # false on every object and use no numeric or length bounds.
            return {"output_config": {"format": {"type": "json_schema", "schema": schema}}}
        return {}


DIALECT = AnthropicDialect(
    name="anthropic-messages",
    title="Anthropic messages",
    path="/messages",
    recorder=AnthropicMessages,
)
