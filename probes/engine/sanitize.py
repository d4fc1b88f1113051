"""The engine's edge: provider-controlled values made safe to store and to print.

A provider decides what its usage object, finish reason, error body and headers hold:
2^40 completion tokens, negative prompt tokens, a cost of 1e20, a 50-character finish
reason, U+0000 in an error message, ``Retry-After: nan``. None of it may make a run
impossible to store (Postgres rejects NUL in text, numbers beyond a column's range) or
unprintable (NaN is not JSON). So, once per run after its metrics (never per chunk):

* usage that cannot be true is dropped whole, with the reason kept next to the reported
  object, and our own token count stands in for it;
* strings are cleaned of control characters, scrubbed of the secrets in force (scrub.py),
  then cut to their column's length (a key cut first is no longer found whole);
* numbers are finite and within their column's range, or null (unmeasured).

The limits below are the storage contract: probes/models/runs.py sizes its columns from them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import orjson

from . import scrub
from .contract import STATUSES
from .http_errors import MAX_RETRY_AFTER_S
from .result import RunResult

FINISH_REASON_MAX = 40  # characters
ERROR_MAX = 1000  # characters
MAX_COUNT = 2_147_483_647  # a 32-bit integer column
# No single response holds more tokens than this; a provider that says so is wrong, not
# generous (the largest context windows are ~10 M tokens).
MAX_PLAUSIBLE_TOKENS = 100_000_000
MAX_COST_USD = 100_000.0  # one request; the cost columns hold up to 999,999.99999999
# Provider JSON kept with a run (usage, server timing, error object).
JSON_MAX_BYTES = 32 * 1024
JSON_MAX_DEPTH = 12
JSON_MAX_ITEMS = 100
JSON_MAX_STRING = 2000

_USAGE_COUNTS = (
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "cache_creation_input_tokens",
    "completion_tokens_provisional_from_message_start",
)
# C0 controls but tab and newline, DEL: never useful in a message, and NUL is unstorable.
_CONTROLS = dict.fromkeys([*range(0, 9), 11, 12, *range(14, 32), 127])

_FLOAT_FIELDS = [
    f.name for f in dataclasses.fields(RunResult) if f.type in ("float | None", "float")
]
_COUNT_FIELDS = [
    f.name for f in dataclasses.fields(RunResult) if f.type == "int | None" and f.name != "t0_ns"
]
_COST_FIELDS = ("cost_usd", "provider_cost_usd")


def plausible_usage(usage: dict[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """(usage, None) if a dialect's normalised usage can be believed, else (None, why)."""
    if not usage:
        return usage, None
    for key in _USAGE_COUNTS:
        value = usage.get(key)
        if value is not None and not 0 <= value <= MAX_PLAUSIBLE_TOKENS:
            return None, f"usage dropped: {key} {value} is not a plausible token count"
    cost = usage.get("cost")
    if cost is not None and not (math.isfinite(cost) and 0 <= cost <= MAX_COST_USD):
        return None, f"usage dropped: cost {cost} is not a plausible price for one request"
    return usage, None


def finite(value: float | None, low: float = -math.inf, high: float = math.inf) -> float | None:
    """``value`` if it is a finite number within [low, high], else None."""
    if value is None or not isinstance(value, int | float) or isinstance(value, bool):
        return None
    value = float(value)
    return value if math.isfinite(value) and low <= value <= high else None


def clean_text(text: str, limit: int) -> str:
    """No control characters (tab and newline kept), no lone surrogates, no secret of this
    context (scrub.cut: scrubbed before it is cut), at most limit."""
    text = scrub.cut(text.translate(_CONTROLS), limit)
    return text.encode("utf-8", "replace").decode("utf-8")


def clean_json(value: Any, depth: int = 0) -> Any:
    """A provider's JSON value, storable as jsonb and printable as JSON, within limits."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return clean_text(value, JSON_MAX_STRING)
    if isinstance(value, int):
        if -(2**63) <= value < 2**64:
            return value
        try:  # beyond 64 bits: as a float, the way most JSON readers would take it
            return float(value)
        except OverflowError:
            return None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if depth >= JSON_MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        items = list(value.items())[:JSON_MAX_ITEMS]
        return {clean_text(str(k), 200): clean_json(v, depth + 1) for k, v in items}
    if isinstance(value, list | tuple):
        return [clean_json(v, depth + 1) for v in value[:JSON_MAX_ITEMS]]
    return clean_text(str(value), JSON_MAX_STRING)


def bounded_json(value: Any) -> Any:
    """clean_json, and a marker instead of an object too large to keep with every run."""
    if value is None:
        return None
    value = clean_json(value)
    size = len(orjson.dumps(value))
    if size > JSON_MAX_BYTES:
        return {"inferwatch_dropped": f"provider object of {size} bytes (limit {JSON_MAX_BYTES})"}
    return value


def sanitize_result(result: RunResult) -> None:
    """Bring every field of a finished run within its storage limits, in place."""
    if result.status not in STATUSES:
        result.error = f"unknown status {result.status!r}: {result.error or ''}"
        result.status = "protocol_error"
    if not (isinstance(result.http_status, int) and 100 <= result.http_status <= 999):
        result.http_status = None
    for name in _FLOAT_FIELDS:
        setattr(result, name, finite(getattr(result, name)))
    for name in _COUNT_FIELDS:
        value = getattr(result, name)
        if value is not None and not (type(value) is int and 0 <= value <= MAX_COUNT):
            setattr(result, name, None)
    for name in _COST_FIELDS:
        setattr(result, name, finite(getattr(result, name), 0.0, MAX_COST_USD))
    if result.retry_after_s is not None:
        result.retry_after_s = min(max(result.retry_after_s, 0.0), MAX_RETRY_AFTER_S)
    result.error = clean_text(str(result.error), ERROR_MAX) if result.error else result.error
    finish = result.finish_reason
    result.finish_reason = (
        clean_text(finish, FINISH_REASON_MAX) if isinstance(finish, str) else None
    )
    result.usage = bounded_json(result.usage)
    result.server_timing = bounded_json(result.server_timing)
    result.error_detail = bounded_json(result.error_detail)
    result.rate_limit = bounded_json(result.rate_limit)
