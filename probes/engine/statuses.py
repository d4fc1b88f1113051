"""How a run ended: every status the engine records, with its label, its meaning (the
methodology page, the API description) and whether it is worth retrying. Part of the
measurement contract (contract.py re-exports these names)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Status:
    name: str
    label: str  # short, for choices and tables
    meaning: str  # for the methodology page and the API description
    retryable: bool = False  # transient by nature: worth retrying later with backoff


_STATUSES = (
    Status("ok", "ok", "Completed with output."),
    Status("auth_error", "auth error (401/403)", "401/403: the key was refused."),
    Status("not_found", "not found (404)", "404: the model is gone or misnamed."),
    Status(
        "rate_limited",
        "rate limited (429)",
        "429, with retry_after_s when the provider sends one.",
        retryable=True,
    ),
    Status("http_error", "other HTTP 4xx", "Another 4xx answer."),
    Status("server_error", "server error (5xx)", "5xx answer.", retryable=True),
    Status(
        "timeout_connect",
        "connect timeout",
        "No connection within the connect timeout.",
        retryable=True,
    ),
    Status(
        "timeout_first_token",
        "first-token timeout",
        "Connected, but no output event within the first-token timeout.",
        retryable=True,
    ),
    Status(
        "timeout_stall",
        "stalled",
        "No event for longer than the stall limit mid-stream.",
        retryable=True,
    ),
    Status(
        "timeout_total",
        "total timeout",
        "The whole request exceeded the total timeout.",
        retryable=True,
    ),
    Status(
        "stream_error", "error in stream", "An error event inside a 200 stream.", retryable=True
    ),
    Status(
        "protocol_error",
        "protocol error",
        "Malformed SSE or JSON, or a response past one of the engine's limits (named).",
    ),
    Status(
        "truncated",
        "truncated",
        "The stream ended without its completion marker.",
        retryable=True,
    ),
    Status("empty", "empty", "Completed with no output."),
    Status("network_error", "network error", "Refused, reset, or DNS failure.", retryable=True),
)

STATUS_INFO: dict[str, Status] = {s.name: s for s in _STATUSES}
STATUSES: tuple[str, ...] = tuple(STATUS_INFO)
RETRYABLE_STATUSES = frozenset(s.name for s in _STATUSES if s.retryable)
STATUS_CHOICES: list[tuple[str, str]] = [(s.name, s.label) for s in _STATUSES]
STATUS_MEANINGS: dict[str, str] = {s.name: s.meaning for s in _STATUSES}

# Two fields a provider words (its finish reason; a failed check quoting its answer): the
# contract's definitions say what everyone but staff reads of them instead.
FINISH_REASON_TEXT = (
    "Why the answer ended, in our words: stop, length, tool_calls, content_filter or other "
    "(the provider's own word is kept for staff)."
)
CHECK_DETAIL_TEXT = (
    "Why an answer failed its check, in our words: not JSON, breaks the schema, not a tool "
    "call, an unknown tool, or the workload's schema at fault (the rule it broke, quoting "
    "the answer, is kept for staff)."
)
