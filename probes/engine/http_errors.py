"""Non-2xx responses: status mapping, error messages, retry-after and rate-limit headers."""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import re
from typing import Any

from . import json_budget, scrub

ERROR_BODY_LIMIT = 64 * 1024
ERROR_MAX_NODES = 5_000  # an error object is a few fields
# A provider asking for a longer wait is asked again after this long (engine/sanitize.py
# keeps the same bound for the stored value).
MAX_RETRY_AFTER_S = 86_400.0


def status_for_http(code: int) -> str:
    if code in (401, 403):
        return "auth_error"
    if code == 404:
        return "not_found"
    if code == 429:
        return "rate_limited"
    if code >= 500:
        return "server_error"
    return "http_error"


def redact(text: str, secrets: list[str]) -> str:
    """Replace every known secret in `text` (error messages, logs), in any of its forms or a
    12-character piece of one (scrub.py), with a marker."""
    return scrub.Scrubber(s for s in secrets if s and len(s) >= 4).text(text)


def redact_object(obj: Any, secrets: list[str]) -> Any:
    """The same for a provider's error object (any JSON value), keys as values."""
    return scrub.Scrubber(s for s in secrets if s and len(s) >= 4).value(obj)


def short(text: str, limit: int = 300) -> str:
    """One line of at most ``limit`` characters, scrubbed of this context's secrets first
    (a key cut in two is no longer found whole)."""
    return scrub.cut(" ".join(text.split()), limit)


def error_from_body(body: bytes) -> tuple[str | None, Any]:
    """(short message, provider error object) from an error response body."""
    if not body:
        return None, None
    try:
        obj = json_budget.loads(body, ERROR_MAX_NODES)
    except ValueError:  # not JSON, or a bomb of values: read as text
        text = re.sub(rb"<[^>]*>", b" ", body[:4096]).decode("utf-8", "replace")
        return (short(text) or None), None
    return message_of(obj), (obj.get("error", obj) if isinstance(obj, dict) else obj)


def message_of(obj: Any) -> str | None:
    """A short message from any of the error shapes providers use."""
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, str):
            return short(err)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or err.get("msg")
            kind = err.get("type") or err.get("code")
            if msg and kind:
                return short(f"{kind}: {msg}")
            if msg or kind:
                return short(str(msg or kind))
        detail = obj.get("detail") or obj.get("message")
        if detail:
            return short(str(detail))
    if obj is None:
        return None
    return short(str(obj))


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def _sane_seconds(seconds: float) -> float | None:
    """A provider's wait, clamped to [0, MAX_RETRY_AFTER_S]; nan and inf mean nothing."""
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def parse_seconds(value: str | None) -> float | None:
    """'5', '1.5', '8m38.4s', '250ms', RFC 3339 or HTTP-date -> seconds from now.

    Always a finite number within [0, MAX_RETRY_AFTER_S], or None.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return _sane_seconds(float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if parts and "".join(n + u for n, u in parts) == value:
        scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
        return _sane_seconds(round(sum(float(n) * scale[u] for n, u in parts), 6))
    when: dt.datetime | None = None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    try:
        seconds = (when - dt.datetime.now(dt.UTC)).total_seconds()
    except OverflowError:
        return None
    return _sane_seconds(round(seconds, 3))


def retry_after(headers: Any) -> float | None:
    """Seconds to wait: ``retry-after-ms`` first (OpenAI), then ``retry-after``."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            seconds = _sane_seconds(float(ms) / 1000.0)
        except ValueError:
            seconds = None
        if seconds is not None:
            return seconds
    return parse_seconds(headers.get("retry-after"))


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def rate_limit(headers: Any) -> dict[str, Any] | None:
    """x-ratelimit-* (OpenAI, Groq; Cerebras adds -day/-minute) or anthropic-ratelimit-*."""
    out: dict[str, Any] = {}
    for kind in ("requests", "tokens"):
        for prefix in ("x-ratelimit", "anthropic-ratelimit"):
            for suffix in ("", "-day", "-minute"):
                limit = _int(headers.get(f"{prefix}-limit-{kind}{suffix}"))
                if prefix == "anthropic-ratelimit":
                    limit = _int(headers.get(f"{prefix}-{kind}-limit"))
                remaining = _int(
                    headers.get(f"{prefix}-remaining-{kind}{suffix}")
                    or headers.get(f"{prefix}-{kind}-remaining")
                )
                reset = parse_seconds(
                    headers.get(f"{prefix}-reset-{kind}{suffix}")
                    or headers.get(f"{prefix}-{kind}-reset")
                )
                if limit is not None and f"limit_{kind}" not in out:
                    out[f"limit_{kind}"] = limit
                if remaining is not None and f"remaining_{kind}" not in out:
                    out[f"remaining_{kind}"] = remaining
                if reset is not None and f"reset_{kind}_seconds" not in out:
                    out[f"reset_{kind}_seconds"] = reset
    return out or None
