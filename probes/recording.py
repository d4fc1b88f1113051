"""RunResult → ProbeRun: one row per request, written once, never lost.

A row is one INSERT, so a worker killed mid-write leaves nothing half-written. Scheduled
runs carry (probe, slot_at, request_index), unique in the table: a redelivered slot
inserts nothing the second time (ON CONFLICT DO NOTHING), so nothing is duplicated.

When the database is away, the write is retried with back-off for a while; if it is
still away, the row goes to a spool list in Redis, drained on the next successful write
and every minute by the rollup task. Either way the measurement reaches the table; the
rollup maintenance (dashboard/rollups.py) finds every new row by its id, late ones too.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import (
    DataError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    connection,
    transaction,
)

from probes.engine import RunResult, contract, sanitize
from probes.groups import Measured
from probes.models import Price, ProbeRun, WorkerCalibration
from probes.redis_client import redis_client

log = logging.getLogger(__name__)

SPOOL_KEY = "inferwatch:spool:runs"
SPOOL_REJECTED_KEY = "inferwatch:spool:runs:rejected"  # kept for a human to look at
DB_RETRY_FOR_S = 30.0

# RunResult fields stored under the same name on ProbeRun (probes/engine/contract.py),
# by how they are stored: text is blank, not null, when absent; flags are never null.
# (The contract's WORKLOAD_FIELDS come from RunContext.measured, not from RunResult.)
_STORED = {name: f for name, f in contract.ALL_RUN_FIELDS.items() if name != "status"}
_METRIC_FIELDS = [name for name, f in _STORED.items() if f.kind in (contract.NUMBER, contract.JSON)]
_TEXT_FIELDS = [name for name, f in _STORED.items() if f.kind == contract.TEXT]
_FLAG_FIELDS = [name for name, f in _STORED.items() if f.kind == contract.FLAG]
_ERROR_MAX = sanitize.ERROR_MAX


@dataclass(frozen=True)
class RunContext:
    """Where a run belongs: everything about it the engine does not know."""

    endpoint_id: int
    workload_id: int
    region: str
    worker: str
    probe_id: int | None = None
    slot_at: datetime | None = None
    run_group: uuid.UUID | None = None
    request_index: int = 0
    price: Price | None = None
    # The worker's latest calibration, read before measuring: recording a finished run
    # must need no query but its INSERT (the database may be away by then).
    ceiling: WorkerCalibration | None = None
    # The workload's view of the request: role in its group, prompt seed, check verdicts.
    measured: Measured | None = None


def run_identity(result: RunResult, ctx: RunContext) -> dict[str, Any]:
    """The columns that say which run this is (and its price), whatever it measured."""
    fields: dict[str, Any] = dict(
        probe_id=ctx.probe_id,
        endpoint_id=ctx.endpoint_id,
        workload_id=ctx.workload_id,
        region=ctx.region,
        worker=ctx.worker,
        slot_at=ctx.slot_at,
        run_group=ctx.run_group or uuid.uuid4(),
        request_index=ctx.request_index,
        started_at=result.started_at or datetime.now(UTC),
        methodology_version=str(result.methodology_version),
    )
    m = ctx.measured
    if m is not None:
        fields.update(
            role=m.role,
            group_summary=m.group_summary,
            prompt_seed=m.seed,
            prompt_tokens_o200k=m.prompt_tokens_o200k,
            output_valid=m.output_valid,
            check_detail=m.check_detail[:300],
            stopped_short=m.stopped_short,
        )
    if ctx.price is not None:
        fields.update(
            price_input_per_m=ctx.price.input_per_m,
            price_cached_input_per_m=ctx.price.cached_input_per_m,
            price_output_per_m=ctx.price.output_per_m,
        )
    return fields


def run_fields(result: RunResult, ctx: RunContext) -> dict[str, Any]:
    """The ProbeRun column values for one measured request."""
    fields: dict[str, Any] = {name: getattr(result, name) for name in _METRIC_FIELDS}
    fields.update({name: (getattr(result, name) or "") for name in _TEXT_FIELDS})
    fields.update({name: bool(getattr(result, name)) for name in _FLAG_FIELDS})
    fields["error"] = fields["error"][:_ERROR_MAX]
    fields.update(run_identity(result, ctx))
    fields.update(
        status=result.status,
        cost_usd=_decimal(result.cost_usd),
        provider_cost_usd=_decimal(result.provider_cost_usd),
        client_bound=is_client_bound(result, ctx.ceiling),
    )
    return fields


def _decimal(value: float | None) -> Decimal | None:
    return None if value is None else Decimal(str(round(value, 8)))


def latest_calibration(worker: str) -> WorkerCalibration | None:
    return WorkerCalibration.objects.filter(worker=worker).order_by("-measured_at").first()


def is_client_bound(result: RunResult, calibration: WorkerCalibration | None) -> bool:
    """Was this run near the worker's own measured ceiling (so maybe our limit, not theirs)?"""
    if result.output_tps is None or calibration is None:
        return False
    margin = settings.CLIENT_BOUND_MARGIN
    if calibration.max_output_tps and result.output_tps >= margin * calibration.max_output_tps:
        return True
    if calibration.max_events_per_s and result.output_events and result.e2e_ms:
        streaming_s = max((result.e2e_ms - (result.ttft_ms or 0)) / 1000, 1e-3)
        return result.output_events / streaming_s >= margin * calibration.max_events_per_s
    return False


# -- writing --------------------------------------------------------------------------------


def _insert(fields: dict[str, Any]) -> None:
    # ignore_conflicts: a redelivered slot finds its row already there and adds nothing.
    # The savepoint keeps a refused row from aborting a caller's transaction.
    with transaction.atomic():
        ProbeRun.objects.bulk_create([ProbeRun(**fields)], ignore_conflicts=True)


# What a row that cannot be stored raises: the database refusing a value (DataError,
# IntegrityError), the driver refusing one (NUL in text), Django failing to adapt one
# (a decimal beyond its digits).
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


def refused_row(fields: dict[str, Any], exc: Exception) -> dict[str, Any]:
    """The stand-in for a run the database refused: its identity, status protocol_error
    and why, so the slot still ends as one stored run (counted against the provider
    whose values made it unstorable, never as our lost slot)."""
    reason = f"{type(exc).__name__}: {exc}"
    was = fields.get("status") or "?"
    error = f"the run ({was}) could not be stored, the provider's values were refused: {reason}"
    stand_in = {name: fields[name] for name in _IDENTITY_FIELDS if name in fields}
    stand_in.update(
        status="protocol_error",
        error=sanitize.clean_text(" ".join(error.split()), sanitize.ERROR_MAX),
    )
    return stand_in


def _insert_or_stand_in(fields: dict[str, Any]) -> dict[str, Any]:
    """Insert the run, or its protocol_error stand-in if the row itself is refused.

    Returns what was written. Database outages (OperationalError) pass through.
    """
    try:
        _insert(fields)
        return fields
    except ROW_ERRORS as exc:
        log.warning("Run refused by the database (%s); storing it as protocol_error", exc)
        stand_in = refused_row(fields, exc)
        _insert(stand_in)
        return stand_in


def save(fields: dict[str, Any], retry_for_s: float = DB_RETRY_FOR_S) -> str:
    """Write one run; 'written' or 'spooled' (database away longer than retry_for_s)."""
    deadline = time.monotonic() + retry_for_s
    delay = 0.25
    while True:
        try:
            fields = _insert_or_stand_in(fields)
            break
        except (OperationalError, InterfaceError) as exc:
            # Drop the broken connection; Django opens a new one on the next query.
            connection.close()
            if time.monotonic() >= deadline:
                log.error("Database away for %.0f s; spooling the run to Redis", retry_for_s)
                spool(fields)
                return "spooled"
            log.warning("Database unavailable (%s); retrying in %.1f s", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
    drain_spool()
    return "written"


def record(result: RunResult, ctx: RunContext, retry_for_s: float = DB_RETRY_FOR_S) -> str:
    try:
        fields = run_fields(result, ctx)
    except ROW_ERRORS as exc:  # a value that cannot even become a column value
        fields = refused_row(run_identity(result, ctx) | {"status": result.status}, exc)
    return save(fields, retry_for_s)


# -- the spool ------------------------------------------------------------------------------


class _SpoolEncoder(DjangoJSONEncoder):
    # DjangoJSONEncoder cuts datetimes to milliseconds; slot_at is part of a run's unique
    # key (and matches its ledger row), so a spooled run must keep it to the microsecond.
    def default(self, o: Any) -> Any:
        if isinstance(o, datetime):
            return o.isoformat()
        return super().default(o)


def _to_json(fields: dict[str, Any]) -> str:
    return json.dumps(fields, cls=_SpoolEncoder)


def _from_json(text: str) -> dict[str, Any]:
    raw = json.loads(text)
    by_attname = {f.attname: f for f in ProbeRun._meta.concrete_fields}
    return {name: by_attname[name].to_python(value) for name, value in raw.items()}


def spool(fields: dict[str, Any]) -> None:
    redis_client().rpush(SPOOL_KEY, _to_json(fields))


def _set_aside(client: Any, item: bytes | str, exc: Exception) -> None:
    """Move a spooled item that can never be written out of the way of the good ones."""
    log.error("Spooled run cannot be written (%s); moved to %s", exc, SPOOL_REJECTED_KEY)
    pipe = client.pipeline()
    pipe.rpush(SPOOL_REJECTED_KEY, item)
    pipe.lrem(SPOOL_KEY, 1, item)
    pipe.execute()


def drain_spool(limit: int = 1000) -> int:
    """Write spooled runs to the database; returns how many. Safe to run concurrently.

    A run the database refuses is written as its protocol_error stand-in; an item that
    cannot even be read, or whose stand-in is refused too, is set aside (never retried
    ahead of the runs behind it).
    """
    try:
        client = redis_client()
        drained = 0
        while drained < limit:
            item = client.lindex(SPOOL_KEY, 0)
            if item is None:
                break
            try:
                # Idempotent: a twice-drained run is inserted once.
                _insert_or_stand_in(_from_json(item))
            except (OperationalError, InterfaceError):
                raise
            except (*ROW_ERRORS, KeyError, ValidationError) as exc:
                _set_aside(client, item, exc)
                continue
            client.lrem(SPOOL_KEY, 1, item)  # only after the row is in
            drained += 1
    except (OperationalError, InterfaceError):
        connection.close()
        log.warning("Database still away; spooled runs stay in Redis")
    except Exception as exc:
        log.warning("Could not drain the run spool: %s", exc)
        return 0
    if drained:
        log.info("Wrote %d spooled runs", drained)
    return drained
