"""The bytes of each API's stream, pre-templated so emitting costs a few microseconds."""

from __future__ import annotations

from typing import Any

import orjson

HUGE_EVENT_BYTES = 6 * 1024 * 1024


def _json(obj: Any) -> bytes:
    return orjson.dumps(obj)


class OpenAIChatEvents:
    """chat.completion.chunk events, as OpenAI and vLLM send them."""

    def __init__(self, model: str, request_id: str) -> None:
        head = _json(
            {"id": request_id, "object": "chat.completion.chunk", "created": 0, "model": model}
        )[:-1]
        self._head = head
        self._answer = b"data: " + head + b',"choices":[{"index":0,"delta":{"content":'
        self._reasoning = b"data: " + head + b',"choices":[{"index":0,"delta":{"reasoning_content":'
        self._end = b'},"finish_reason":null}]}\n\n'

    def head(self) -> bytes:
        # The role chunk arrives first and carries no token: a classic TTFT trap.
        return (
            b"data: "
            + self._head
            + b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
            b'"finish_reason":null}]}\n\n'
        )

    def output(self, text: str, reasoning: bool) -> bytes:
        return (self._reasoning if reasoning else self._answer) + _json(text) + self._end

    def tool(self, text: str, name: str | None) -> bytes:
        """A tool-call delta; ``name`` is given on the call's first delta only."""
        call: dict[str, Any] = {"index": 0, "function": {"arguments": text}}
        if name is not None:
            call = {
                "index": 0,
                "id": "call_sim_1",
                "type": "function",
                "function": {"name": name, "arguments": text},
            }
        return (
            b"data: "
            + self._head
            + b',"choices":[{"index":0,"delta":{"tool_calls":'
            + _json([call])
            + b'},"finish_reason":null}]}\n\n'
        )

    def error(self) -> bytes:
        return (
            b"data: "
            + _json(
                {
                    "error": {
                        "message": "simulated failure mid-stream",
                        "type": "server_error",
                        "param": None,
                        "code": "simulated",
                    }
                }
            )
            + b"\n\n"
        )

    def malformed(self) -> bytes:
        return b"data: " + self._head + b',"choices":[{"index":0,"delta":{"content":"oops"\n\n'

    def invalid_utf8(self) -> bytes:
        return self._answer + b'"\xff\xfe bad bytes"' + self._end

    def huge(self) -> bytes:
        return self.output("x" * HUGE_EVENT_BYTES, reasoning=False)

    def tail(
        self,
        finish: str,
        usage: dict[str, Any] | None,
        timing: dict[str, Any],
        done: bool,
        eval_count: int | None = None,
    ) -> bytes:
        # Ollama puts its generated-token count on the final chunk (eval_count).
        extra = b"" if eval_count is None else b',"eval_count":' + _json(eval_count)
        finish_chunk = (
            b"data: "
            + self._head
            + b',"choices":[{"index":0,"delta":{},"finish_reason":'
            + _json(finish)
            + b"}]"
            + extra
            + b"}\n\n"
        )
        if not usage:  # no usage: llama-cpp-python, older vLLM and TGI builds, proxies
            return finish_chunk + (b"data: [DONE]\n\n" if done else b"")
        # x_simulator (true send times) rides inside usage, which clients keep verbatim.
        usage = {**usage, "x_simulator": timing["x_simulator"]}
        usage_chunk = b"data: " + self._head + b',"choices":[],"usage":' + _json(usage)
        if timing["time_info"] is not None:  # a vLLM-like server reports it only when asked
            usage_chunk += b',"time_info":' + _json(timing["time_info"])
        usage_chunk += b"}\n\n"
        return finish_chunk + usage_chunk + (b"data: [DONE]\n\n" if done else b"")


def _typed_event(kind: str, payload: dict[str, Any]) -> bytes:
    """A named SSE event whose JSON carries its own name as "type" (Anthropic, Responses)."""
    return b"event: " + kind.encode() + b"\ndata: " + _json({"type": kind, **payload}) + b"\n\n"


class AnthropicEvents:
    """Messages API events: message_start ... message_stop."""

    def __init__(
        self,
        model: str,
        request_id: str,
        input_tokens: int,
        with_usage: bool = True,
        cached_tokens: int = 0,
    ) -> None:
        self._model = model
        self._id = request_id
        self._input = input_tokens
        self._with_usage = with_usage
        self._cached = cached_tokens
        self._block = -1  # index of the open content block
        self._block_kind: str | None = None

    def head(self) -> bytes:
        message = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                # Anthropic's input_tokens leaves out the tokens read from the cache.
                "input_tokens": self._input - self._cached,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": self._cached,
                "output_tokens": 1,
            },
        }
        if not self._with_usage:
            del message["usage"]
        return _typed_event("message_start", {"message": message}) + _typed_event("ping", {})

    def _switch(self, kind: str, name: str | None = None) -> bytes:
        if self._block_kind == kind:
            return b""
        out = b""
        if self._block_kind is not None:
            out += _typed_event("content_block_stop", {"index": self._block})
        self._block += 1
        self._block_kind = kind
        if kind == "thinking":
            block: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind == "tool_use":
            block = {"type": "tool_use", "id": "toolu_sim_1", "name": name or "", "input": {}}
        else:
            block = {"type": "text", "text": ""}
        return out + _typed_event(
            "content_block_start", {"index": self._block, "content_block": block}
        )

    def output(self, text: str, reasoning: bool) -> bytes:
        if reasoning:
            delta = {"type": "thinking_delta", "thinking": text}
            return self._switch("thinking") + _typed_event(
                "content_block_delta", {"index": self._block, "delta": delta}
            )
        delta = {"type": "text_delta", "text": text}
        return self._switch("text") + _typed_event(
            "content_block_delta", {"index": self._block, "delta": delta}
        )

    def tool(self, text: str, name: str | None) -> bytes:
        delta = {"type": "input_json_delta", "partial_json": text}
        return self._switch("tool_use", name) + _typed_event(
            "content_block_delta", {"index": self._block, "delta": delta}
        )

    def error(self) -> bytes:
        return _typed_event(
            "error",
            {"error": {"type": "overloaded_error", "message": "simulated failure mid-stream"}},
        )

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,\n\n'

    def invalid_utf8(self) -> bytes:
        return (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            b'"delta":{"type":"text_delta","text":"\xff\xfe"}}\n\n'
        )

    def huge(self) -> bytes:
        return self.output("x" * HUGE_EVENT_BYTES, reasoning=False)

    def tail(
        self,
        finish: str,
        usage: dict[str, Any] | None,
        timing: dict[str, Any],
        done: bool,
        eval_count: int | None = None,
    ) -> bytes:
        out = b""
        if self._block_kind is not None:
            out += _typed_event("content_block_stop", {"index": self._block})
        stop = {"length": "max_tokens", "tool_calls": "tool_use"}.get(finish, "end_turn")
        if usage is None:
            out += _typed_event(
                "message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}}
            )
            return out + (_typed_event("message_stop", {}) if done else b"")
        out += _typed_event(
            "message_delta",
            {
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {
                    "output_tokens": usage["completion_tokens"],
                    "output_tokens_details": {
                        "thinking_tokens": usage["completion_tokens_details"]["reasoning_tokens"]
                    },
                    "x_simulator": timing["x_simulator"],
                },
            },
        )
        if done:
            out += _typed_event("message_stop", {})
        return out


class OpenAIResponsesEvents:
    """Responses API events: response.created ... response.completed (no [DONE])."""

    def __init__(
        self,
        model: str,
        request_id: str,
        input_tokens: int,
        with_usage: bool = True,
        cached_tokens: int = 0,
    ) -> None:
        self._response = {"id": request_id, "object": "response", "model": model}
        self._input = input_tokens
        self._cached = cached_tokens
        self._answer = (
            b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
            b'"delta":'
        )
        self._reasoning = (
            b'event: response.reasoning_text.delta\ndata: {"type":"response.reasoning_text.delta",'
            b'"delta":'
        )

    def head(self) -> bytes:
        return _typed_event(
            "response.created", {"response": {**self._response, "status": "in_progress"}}
        )

    def output(self, text: str, reasoning: bool) -> bytes:
        return (self._reasoning if reasoning else self._answer) + _json(text) + b"}\n\n"

    def error(self) -> bytes:
        return _typed_event(
            "error", {"error": {"type": "server_error", "message": "simulated failure mid-stream"}}
        )

    def malformed(self) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",\n\n'

    def invalid_utf8(self) -> bytes:
        return self._answer + b'"\xff\xfe bad bytes"}\n\n'

    def huge(self) -> bytes:
        return self.output("x" * HUGE_EVENT_BYTES, reasoning=False)

    def tool(self, text: str, name: str | None) -> bytes:
        # The Responses recorder reads text deltas only: a scripted call streams as text.
        return self.output(text, reasoning=False)

    def tail(
        self,
        finish: str,
        usage: dict[str, Any] | None,
        timing: dict[str, Any],
        done: bool,
        eval_count: int | None = None,
    ) -> bytes:
        if not done:
            return b""
        status = "incomplete" if finish == "length" else "completed"
        response: dict[str, Any] = {
            **self._response,
            "status": status,
            "incomplete_details": {"reason": "max_output_tokens"} if finish == "length" else None,
        }
        if usage is None:  # a server that sends no usage
            return _typed_event(f"response.{status}", {"response": response})
        response |= {
            "usage": {
                "input_tokens": self._input,
                "input_tokens_details": {"cached_tokens": self._cached},
                "output_tokens": usage["completion_tokens"],
                "output_tokens_details": {
                    "reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"]
                },
                "total_tokens": self._input + usage["completion_tokens"],
                "x_simulator": timing["x_simulator"],
            },
        }
        return _typed_event(f"response.{status}", {"response": response})


# The stream each API speaks, by the engine's dialect name (probes/engine/dialects/).
# Each is called (model, request_id, input_tokens, with_usage, cached_tokens).
EVENTS = {
    "openai-chat": lambda model, request_id, *_: OpenAIChatEvents(model, request_id),
    "anthropic-messages": AnthropicEvents,
    "openai-responses": OpenAIResponsesEvents,
}
