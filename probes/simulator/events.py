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

    def tail(self, finish: str, usage: dict[str, Any], timing: dict[str, Any], done: bool) -> bytes:
        finish_chunk = (
            b"data: "
            + self._head
            + b',"choices":[{"index":0,"delta":{},"finish_reason":'
            + _json(finish)
            + b"}]}\n\n"
        )
        if not usage:  # a server that sends no usage (llama.cpp without the option)
            return finish_chunk + (b"data: [DONE]\n\n" if done else b"")
        # x_simulator (true send times) rides inside usage, which clients keep verbatim.
        usage = {**usage, "x_simulator": timing["x_simulator"]}
        usage_chunk = b"data: " + self._head + b',"choices":[],"usage":' + _json(usage)
        usage_chunk += b',"time_info":' + _json(timing["time_info"]) + b"}\n\n"
        return finish_chunk + usage_chunk + (b"data: [DONE]\n\n" if done else b"")


def _anthropic(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + _json({"type": kind, **payload}) + b"\n\n"


class AnthropicEvents:
    """Messages API events: message_start ... message_stop."""

    def __init__(self, model: str, request_id: str, input_tokens: int) -> None:
        self._model = model
        self._id = request_id
        self._input = input_tokens
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
                "input_tokens": self._input,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 1,
            },
        }
        return _anthropic("message_start", {"message": message}) + _anthropic("ping", {})

    def _switch(self, kind: str) -> bytes:
        if self._block_kind == kind:
            return b""
        out = b""
        if self._block_kind is not None:
            out += _anthropic("content_block_stop", {"index": self._block})
        self._block += 1
        self._block_kind = kind
        block = (
            {"type": "thinking", "thinking": "", "signature": ""}
            if kind == "thinking"
            else {"type": "text", "text": ""}
        )
        return out + _anthropic(
            "content_block_start", {"index": self._block, "content_block": block}
        )

    def output(self, text: str, reasoning: bool) -> bytes:
        if reasoning:
            delta = {"type": "thinking_delta", "thinking": text}
            return self._switch("thinking") + _anthropic(
                "content_block_delta", {"index": self._block, "delta": delta}
            )
        delta = {"type": "text_delta", "text": text}
        return self._switch("text") + _anthropic(
            "content_block_delta", {"index": self._block, "delta": delta}
        )

    def error(self) -> bytes:
        return _anthropic(
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

    def tail(self, finish: str, usage: dict[str, Any], timing: dict[str, Any], done: bool) -> bytes:
        out = b""
        if self._block_kind is not None:
            out += _anthropic("content_block_stop", {"index": self._block})
        stop = "max_tokens" if finish == "length" else "end_turn"
        out += _anthropic(
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
            out += _anthropic("message_stop", {})
        return out


def _responses(kind: str, payload: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + _json({"type": kind, **payload}) + b"\n\n"


class OpenAIResponsesEvents:
    """Responses API events: response.created ... response.completed (no [DONE])."""

    def __init__(self, model: str, request_id: str, input_tokens: int) -> None:
        self._response = {"id": request_id, "object": "response", "model": model}
        self._input = input_tokens
        self._answer = (
            b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
            b'"delta":'
        )
        self._reasoning = (
            b'event: response.reasoning_text.delta\ndata: {"type":"response.reasoning_text.delta",'
            b'"delta":'
        )

    def head(self) -> bytes:
        return _responses(
            "response.created", {"response": {**self._response, "status": "in_progress"}}
        )

    def output(self, text: str, reasoning: bool) -> bytes:
        return (self._reasoning if reasoning else self._answer) + _json(text) + b"}\n\n"

    def error(self) -> bytes:
        return _responses(
            "error", {"error": {"type": "server_error", "message": "simulated failure mid-stream"}}
        )

    def malformed(self) -> bytes:
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",\n\n'

    def invalid_utf8(self) -> bytes:
        return self._answer + b'"\xff\xfe bad bytes"}\n\n'

    def huge(self) -> bytes:
        return self.output("x" * HUGE_EVENT_BYTES, reasoning=False)

    def tail(self, finish: str, usage: dict[str, Any], timing: dict[str, Any], done: bool) -> bytes:
        if not done:
            return b""
        status = "incomplete" if finish == "length" else "completed"
        response = {
            **self._response,
            "status": status,
            "incomplete_details": {"reason": "max_output_tokens"} if finish == "length" else None,
            "usage": {
                "input_tokens": self._input,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": usage["completion_tokens"],
                "output_tokens_details": {
                    "reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"]
                },
                "total_tokens": self._input + usage["completion_tokens"],
                "x_simulator": timing["x_simulator"],
            },
        }
        return _responses(f"response.{status}", {"response": response})


# The stream each API speaks, by the engine's dialect name (probes/engine/dialects/).
EVENTS = {
    "openai-chat": lambda model, request_id, input_tokens: OpenAIChatEvents(model, request_id),
    "anthropic-messages": AnthropicEvents,
    "openai-responses": OpenAIResponsesEvents,
}
