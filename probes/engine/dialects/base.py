"""What each provider's stream means: output events, usage, server timing, errors.

A dialect receives the SSE parser's events (``on_event``) and comments (``on_comment``)
and records, per output event, the read timestamp, a one-letter channel and the output
text of that event: the timeline holds output events only, so a flood of keep-alives,
empty deltas or pings costs a counter, not memory. Everything else (tokens, rates,
percentiles) is computed after the stream by ``metrics.py``, so the per-event work here
stays at one ``orjson.loads`` and a few dict lookups.

Channels (metrics.md "output event"): ``a`` answer text, ``r`` reasoning text, ``t``
tool-call delta. Anything else (role-only, empty strings, usage-only, pings, comments,
errors, the completion marker) is counted, never put on the timeline.

A recorder is bounded in count as well as bytes (``Limits``: output events, tool calls,
output text): a stream that passes one ends as a protocol error naming the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from ..json_budget import json_nodes

_loads = orjson.loads
_JSONError = orjson.JSONDecodeError


class BodyRequest(Protocol):
    """What a dialect's ``body`` reads of a request (probes/engine/request.py's
    ProbeRequest). A protocol, so the dialects never import the request module that looks
    them up by name: the import runs one way, request -> dialects."""

    model: str
    messages: list[dict[str, Any]]
    max_tokens: int


# Events larger than this are scanned for their JSON width before they are parsed (a
# normal chunk is a few hundred bytes; three C-speed byte counts of 4 MiB cost ~3 ms).
JSON_SCAN_BYTES = 16 * 1024


class StreamRecorder:
    """Timeline and facts of one stream; each dialect's recorder fills it in."""

    api = "base"
    # The engine's Limits defaults (probes/engine/request.py); the client sets the
    # request's own with bound().
    max_output_events = 100_000
    max_tool_calls = 64
    max_content_chars = 2 * 1024 * 1024
    max_json_nodes = 20_000

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
        self.content_chars = 0  # output text of every channel so far

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

    def bound(
        self,
        max_output_events: int,
        max_tool_calls: int,
        max_content_chars: int,
        max_json_nodes: int = 20_000,
    ) -> None:
        self.max_output_events = max_output_events
        self.max_tool_calls = max_tool_calls
        self.max_content_chars = max_content_chars
        self.max_json_nodes = max_json_nodes

    # -- helpers used by the dialects -------------------------------------------------

    def on_comment(self, t: int) -> None:
        self.comment_lines += 1

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
        """An event that carried no output: counted by the caller, not on the timeline."""

    def _output(self, t: int, idx: int, ch: str, piece: str, carried: int = 0) -> None:
        """One output event on the timeline. ``carried``: characters the event held
        besides ``piece`` (tool-call text beside content): kept too, so counted too."""
        if len(self.t) >= self.max_output_events:
            self.over_limit(
                f"more than {self.max_output_events} output events in one run "
                "(limit max_output_events)"
            )
            return
        self.content_chars += len(piece) + carried
        if self.content_chars > self.max_content_chars:
            self.over_limit(
                f"more than {self.max_content_chars} characters of output in one run "
                "(limit max_content_chars)"
            )
            return
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
        self.done_seen = True
        self.marker_t = t
        self.finished = True

    def _fail_protocol(self, t: int, message: str) -> None:
        self.protocol_error = message
        self.finished = True

    def over_limit(self, message: str) -> None:
        """A count limit passed: the run ends here as a protocol error that names it."""
        if self.protocol_error is None:
            self.protocol_error = message
        self.finished = True

    def new_call(self, name: str) -> bool:
        """Start keeping one more tool call; False (and the run ends) past max_tool_calls."""
        if len(self.tool_names) >= self.max_tool_calls:
            self.over_limit(
                f"more than {self.max_tool_calls} tool calls in one run (limit max_tool_calls)"
            )
            return False
        self.tool_names.append(name)
        self.tool_args.append([])
        return True

    def _set_error(self, err: Any, idx: int, t: int) -> None:
        if self.error is None:
            self.error = err
            self.error_index = idx
            self.error_t = t

    def _parse(self, data: bytes, idx: int, t: int) -> dict[str, Any] | None:
        if len(data) > JSON_SCAN_BYTES and json_nodes(data) > self.max_json_nodes:
            self.over_limit(
                f"SSE event {idx} holds more than {self.max_json_nodes} JSON objects, arrays "
                "and items (limit max_json_nodes)"
            )
            return None
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


def text_of(value: Any) -> str | None:
    """A delta's text: a non-empty string, or the text parts of a list of parts."""
    if type(value) is str:
        return value or None
    if isinstance(value, list):  # some servers stream content as [{type, text}]
        joined = "".join(str_of(p.get("text")) for p in value if type(p) is dict)
        return joined or None
    return None


def tool_text(calls: Any, rec: StreamRecorder | None = None) -> str | None:
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
            name, args = str_of(fn.get("name")), str_of(fn.get("arguments"))
            out.append(name)
            out.append(args)
            if rec is not None:
                keep_call(rec, call.get("index"), name, args)
    return "".join(out) or None


def keep_call(rec: StreamRecorder, index: Any, name: str, args: str) -> None:
    if type(index) is int and index >= 0:
        while len(rec.tool_names) <= index:
            if not rec.new_call(""):
                return
        if name and not rec.tool_names[index]:
            rec.tool_names[index] = name
        rec.tool_args[index].append(args)
        return
    if (name or not rec.tool_names) and not rec.new_call(name):
        return  # legacy function_call: one call, no index
    rec.tool_args[-1].append(args)


def str_of(value: Any) -> str:
    return value if type(value) is str else ""


def dict_of(value: Any) -> dict[str, Any]:
    """A provider's object where one is expected; anything else reads as empty."""
    return value if type(value) is dict else {}


def int_or_none(value: Any) -> int | None:
    return value if type(value) is int else None


@dataclass(frozen=True)
class Dialect:
    """One provider API: where to send a request, what it looks like, and how to read
    the stream that comes back. One per file beside this one, listed in __init__.py."""

    name: str  # the API-style key: ProbeRequest.api, Provider.api_style, measure --api
    title: str  # for choice lists
    path: str  # appended to the base URL, unless the base URL already ends with it
    recorder: type[StreamRecorder]

    def url(self, base_url: str) -> str:
        base = base_url.rstrip("/")
        return base if base.endswith(self.path) else base + self.path

    def warmup_url(self, url: str) -> str:
        """A cheap GET on the same host, to open the connection: the model list."""
        return url.removesuffix(self.path) + "/models"

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    def body(self, req: BodyRequest) -> dict[str, Any]:  # pragma: no cover - per dialect
        raise NotImplementedError

    # Structured output and tool calls: workloads state a JSON schema or tools once,
    # neutrally ({"name", "description", "parameters"} per tool); each API spells the
    # request its own way. The default is the OpenAI chat spelling, which most
    # OpenAI-compatible servers (vLLM, llama.cpp, SGLang) accept too.

    def structured_body(
        self, schema: dict[str, Any] | None = None, tools: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Extra body fields asking for JSON following ``schema``, or for a call of ``tools``."""
        if tools:
            return {
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": t["name"],
                            "description": t.get("description", ""),
                            "parameters": t.get("parameters") or {"type": "object"},
                        },
                    }
                    for t in tools
                ],
                "tool_choice": "required",  # the answer must be a call
            }
        if schema is not None:
            return {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": schema, "strict": True},
                }
            }
        return {}

    def structured_headers(self, schema: dict[str, Any] | None = None) -> dict[str, str]:
        """Extra headers structured output needs (a beta flag on some APIs)."""
        return {}
