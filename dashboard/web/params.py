"""Strict readers for public query parameters (API and pages).

Python's own parsers are generous in ways a URL should not be: `str.isdigit()` accepts
"²", `int()` accepts "٣", " 12 " and "1_000", Django's `parse_datetime` accepts any
Unicode digit and offsets up to ±23:59 that Postgres refuses (its limit is ±15:59).
Each reader here accepts ASCII only, within bounds the database can store, and raises
BadParameter with a message fit for a 400 answer.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import UTC, datetime, timedelta

from django.utils.dateparse import parse_datetime

# Postgres stores bigint ids; 18 digits never overflow it.
MAX_ID = 2**63 - 1
# Postgres refuses UTC offsets beyond ±15:59 (and real ones stay within −12 to +14).
MAX_UTC_OFFSET = timedelta(hours=15, minutes=59)
_DIGITS = re.compile(r"[0-9]{1,18}")
_ISO_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.,][0-9]{1,6})?)?"
    r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)?"
)
_MAX_SHOWN = 60
_MAX_CURSOR = 120


class BadParameter(ValueError):
    """A query parameter we cannot read; the message says what is expected."""


def shown(value: str) -> str:
    """`value` as an error message quotes it: repr'd, and cut when long."""
    return repr(value if len(value) <= _MAX_SHOWN else value[:_MAX_SHOWN] + "…")


def is_whole_number(value: str) -> bool:
    return _DIGITS.fullmatch(value) is not None


def whole_number(name: str, value: str, minimum: int, maximum: int) -> int:
    if not is_whole_number(value) or not minimum <= int(value) <= maximum:
        raise BadParameter(
            f"Invalid {name} {shown(value)}: a whole number from {minimum} to {maximum}."
        )
    return int(value)


def record_id(name: str, value: str) -> int:
    """A database id: ASCII digits, 1 to the bigint maximum."""
    if not is_whole_number(value) or not 1 <= int(value) <= MAX_ID:
        raise BadParameter(f"Unknown {name} {shown(value)}: {name} ids are whole numbers.")
    return int(value)


def instant(name: str, value: str) -> datetime:
    """An ISO 8601 date and time, in UTC; naive times are taken as UTC."""
    message = f"Invalid {name} {shown(value)}: use ISO 8601, e.g. 2025-01-31T12:00:00Z."
    if _ISO_TIME.fullmatch(value) is None:
        raise BadParameter(message)
    try:
        parsed = parse_datetime(value)
    except ValueError:  # well formed but impossible, e.g. month 13
        parsed = None
    if parsed is None:
        raise BadParameter(message)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    if abs(parsed.utcoffset()) > MAX_UTC_OFFSET:
        raise BadParameter(f"{message} UTC offsets go from -15:59 to +15:59.")
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # e.g. year 1 at +01:00 is before the first representable time
        raise BadParameter(message) from None


def encode_cursor(when: datetime, pk: int) -> str:
    raw = f"{when.isoformat()}|{pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(value: str) -> tuple[datetime, int]:
    """The (started_at, id) a cursor points at; BadParameter for anything we did not make."""
    message = "Invalid cursor: pass back the next_cursor of a previous page."
    if len(value) > _MAX_CURSOR or not value.isascii():
        raise BadParameter(message)
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        raise BadParameter(message) from None
    when, _, pk = raw.partition("|")
    try:
        return instant("cursor", when), record_id("cursor", pk)
    except BadParameter:
        raise BadParameter(message) from None
