"""Writing one ProbeRun row, and telling a bad row from a dead database.

A row can fail for two unrelated reasons, handled in opposite ways:

* the *row* is bad: a value the database refuses (SQLSTATE class 22, data exception), a
  constraint (23) or a size (54, program limit exceeded: "total size of jsonb object
  elements exceeds the maximum"), or a value the driver or Django cannot even adapt
  (NUL in text, a decimal beyond its digits). Retrying cannot help: the run is stored at
  once as a minimal protocol_error stand-in, counted against the provider whose values
  made it unstorable. psycopg raises 54000 as an OperationalError, so the class of the
  exception alone cannot tell; its SQLSTATE can.
* the *database* is away: a connection-level failure (no SQLSTATE, class 08, shutdown,
  too many connections...). Only this is retried and spooled (probes/recording/run_spool.py).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import (
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    transaction,
)

from probes.engine import reasons, sanitize
from probes.models import ProbeRun

log = logging.getLogger(__name__)

# Data exception, integrity constraint violation, program limit exceeded.
ROW_SQLSTATE_CLASSES = frozenset({"22", "23", "54"})
# What a row that cannot be stored raises besides a database error with such a SQLSTATE:
# the database refusing a value (DataError, IntegrityError), the driver refusing one
# (NUL in text), Django failing to adapt one (a decimal beyond its digits).
ROW_ERRORS = (DataError, IntegrityError, ValueError, TypeError, ArithmeticError)
# The identity of a run: all a protocol_error stand-in keeps of a row that was refused.
_IDENTITY_FIELDS = (
    "probe_id",
    "endpoint_id",
    "workload_id",
    "region",
    "worker",
    "slot_at",
    "run_group",
    "request_index",
    "started_at",
    "methodology_version",
    "price_input_per_m",
    "price_cached_input_per_m",
    "price_output_per_m",
)


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error (Django wraps the driver's as its cause)."""
    seen: BaseException | None = exc
    for _ in range(4):  # the wrapper, the driver's error, and a little margin
        if seen is None:
            return None
        code = getattr(seen, "sqlstate", None) or getattr(seen, "pgcode", None)
        if isinstance(code, str) and code:
            return code
        seen = seen.__cause__ or seen.__context__
    return None


def is_row_error(exc: BaseException) -> bool:
    """Does this failure belong to the row (never retried), not to the connection?"""
    if isinstance(exc, DatabaseError):
        state = sqlstate(exc)
        if state is not None:
            return state[:2] in ROW_SQLSTATE_CLASSES
        return isinstance(exc, DataError | IntegrityError)  # the driver's own refusals
    return isinstance(exc, ROW_ERRORS)


def is_connection_error(exc: BaseException) -> bool:
    """Is the database away (retry later), rather than refusing this row?"""
    return isinstance(exc, OperationalError | InterfaceError) and not is_row_error(exc)


def refused_row(fields: dict[str, Any], exc: BaseException | str) -> dict[str, Any]:
    """The stand-in for a run that cannot be stored: its identity, status protocol_error
    and why, so the slot still ends as one stored run (counted against the provider
    whose values made it unstorable, never as our lost slot)."""
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    was = fields.get("status") or "?"
    error = f"the run ({was}) could not be stored, the provider's values were refused: {reason}"
    stand_in = {name: fields[name] for name in _IDENTITY_FIELDS if name in fields}
    stand_in.update(
        status="protocol_error",
        reason=reasons.Reason.UNSTORABLE.value,
        error=sanitize.clean_text(" ".join(error.split()), sanitize.ERROR_MAX),
    )
    return stand_in


def insert(fields: dict[str, Any]) -> None:
    # ignore_conflicts: a redelivered slot finds its row already there and adds nothing.
    # The savepoint keeps a refused row from aborting a caller's transaction.
    with transaction.atomic():
        ProbeRun.objects.bulk_create([ProbeRun(**fields)], ignore_conflicts=True)


def insert_or_stand_in(fields: dict[str, Any]) -> dict[str, Any]:
    """Insert the run, or its protocol_error stand-in if the row itself is refused.

    Returns what was written. A connection failure passes through, and so does a
    refused stand-in (its identity itself is unstorable: the caller sets it aside).
    """
    try:
        insert(fields)
        return fields
    except Exception as exc:
        if not is_row_error(exc):
            raise
        log.warning("Run refused by the database (%s); storing it as protocol_error", exc)
        stand_in = refused_row(fields, exc)
    insert(stand_in)
    return stand_in
