"""Why a run failed, in our own words: the vocabulary public pages and the API show.

A failed run keeps two things (README, "One door in"): its verdict — status, HTTP status
and one of the reasons below, all ours — and, for staff only, the error text, which may
quote what the provider or an internal server said (a 403 page, a /metrics body, an error
event). Only the verdict is ever rendered to visitors or returned by the public API, so
whatever a server answers, nothing it wrote reaches a public surface.

``classify`` reads the status and HTTP status, and for the engine's own failures the
limit or rule its message names (those messages are the engine's, not the provider's; a
provider's words cannot choose anything but another reason of this list).
"""

from __future__ import annotations

import re
from enum import StrEnum

from .request import LIMIT_MEANINGS


class Reason(StrEnum):
    KEY_REFUSED = "key_refused"
    MODEL_NOT_FOUND = "model_not_found"
    RATE_LIMITED = "rate_limited"
    REQUEST_REFUSED = "request_refused"
    SERVER_FAILED = "server_failed"
    CONNECT_TIMEOUT = "connect_timeout"
    NO_FIRST_TOKEN = "no_first_token"
    STALLED = "stalled"
    TOO_SLOW = "too_slow"
    ERROR_EVENT = "error_event"
    OVER_LIMIT = "over_limit"
    MALFORMED_STREAM = "malformed_stream"
    NOT_AN_EVENT_STREAM = "not_an_event_stream"
    UNSTORABLE = "unstorable"
    ENDED_INSIDE_EVENT = "ended_inside_event"
    NO_COMPLETION_MARKER = "no_completion_marker"
    NO_OUTPUT = "no_output"
    CONNECTION_FAILED = "connection_failed"


REASON_LABELS: dict[str, str] = {
    Reason.KEY_REFUSED: "the server refused our credentials",
    Reason.MODEL_NOT_FOUND: "the server does not know the model",
    Reason.RATE_LIMITED: "the server asked us to slow down",
    Reason.REQUEST_REFUSED: "the server refused the request",
    Reason.SERVER_FAILED: "the server failed to answer",
    Reason.CONNECT_TIMEOUT: "no connection within the connect timeout",
    Reason.NO_FIRST_TOKEN: "no output within the first-token timeout",
    Reason.STALLED: "the stream stalled",
    Reason.TOO_SLOW: "the whole request passed the total timeout",
    Reason.ERROR_EVENT: "the stream carried an error event",
    Reason.OVER_LIMIT: "the response passed one of the engine's limits",
    Reason.MALFORMED_STREAM: "the stream was not well-formed",
    Reason.NOT_AN_EVENT_STREAM: "the server answered, but not with an event stream",
    Reason.UNSTORABLE: "the provider's values could not be stored",
    Reason.ENDED_INSIDE_EVENT: "the stream ended inside an event",
    Reason.NO_COMPLETION_MARKER: "the stream ended without its completion marker",
    Reason.NO_OUTPUT: "the stream completed without output",
    Reason.CONNECTION_FAILED: "the connection failed (refused, reset, DNS or refused by policy)",
}
# Past a limit, the reason names it: "over_limit:max_lines" (the limits are ours too).
LIMIT_REASONS: tuple[str, ...] = tuple(f"{Reason.OVER_LIMIT}:{name}" for name in LIMIT_MEANINGS)
REASONS: tuple[str, ...] = (*(r.value for r in Reason), *LIMIT_REASONS)
REASON_MAX = max(len(r) for r in REASONS)

_BY_STATUS: dict[str, Reason] = {
    "auth_error": Reason.KEY_REFUSED,
    "not_found": Reason.MODEL_NOT_FOUND,
    "rate_limited": Reason.RATE_LIMITED,
    "http_error": Reason.REQUEST_REFUSED,
    "server_error": Reason.SERVER_FAILED,
    "timeout_connect": Reason.CONNECT_TIMEOUT,
    "timeout_first_token": Reason.NO_FIRST_TOKEN,
    "timeout_stall": Reason.STALLED,
    "timeout_total": Reason.TOO_SLOW,
    "stream_error": Reason.ERROR_EVENT,
    "protocol_error": Reason.MALFORMED_STREAM,
    "truncated": Reason.NO_COMPLETION_MARKER,
    "empty": Reason.NO_OUTPUT,
    "network_error": Reason.CONNECTION_FAILED,
}
_LIMIT = re.compile(r"\(limit (max_\w+)\)|(?:larger|longer) than \d+ bytes")


def classify(status: str, error: str | None) -> str:
    """The reason of a run with this status; ``error`` (the engine's message) only
    refines a protocol error or a truncation. "" for an ok run."""
    if status not in _BY_STATUS:
        return ""
    text = error or ""
    if status == "protocol_error":
        if "could not be stored" in text:
            return Reason.UNSTORABLE
        if "not an event stream" in text:
            return Reason.NOT_AN_EVENT_STREAM
        match = _LIMIT.search(text)
        if match:
            name = match.group(1) or ("max_event_bytes" if "SSE" in text else None)
            name = name or "max_response_bytes"
            return f"{Reason.OVER_LIMIT}:{name}" if name in LIMIT_MEANINGS else Reason.OVER_LIMIT
    if status == "truncated" and "inside an event" in text:
        return Reason.ENDED_INSIDE_EVENT
    return _BY_STATUS[status]


def label(reason: str) -> str:
    """What a reason means, in a sentence's words (for pages)."""
    if reason.startswith(f"{Reason.OVER_LIMIT}:"):
        name = reason.split(":", 1)[1]
        return f"the response passed the engine's {name} limit: {LIMIT_MEANINGS.get(name, '')}"
    return REASON_LABELS.get(reason, "")


# Why an answer ended, in our words: what a visitor and the public API see of a
# provider's finish reason (its own word, any string it likes, is kept for staff).
FINISH_WORDS: tuple[str, ...] = ("stop", "length", "tool_calls", "content_filter", "other")
_FINISH_OF = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "eos": "stop",
    "eos_token": "stop",
    "length": "length",
    "max_tokens": "length",
    "model_length": "length",
    "model_context_window_exceeded": "length",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "safety": "content_filter",
}


def finish_word(reported: str | None) -> str | None:
    """The provider's finish reason as one of FINISH_WORDS (None when it gave none)."""
    if not reported:
        return None
    return _FINISH_OF.get(reported.strip().lower(), "other")
