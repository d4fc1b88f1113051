"""RunResult → ProbeRun: one row per request, written once, never lost.

A row is one INSERT, so a worker killed mid-write leaves nothing half-written. Scheduled
runs carry (probe, slot_at, request_index), unique in the table: a redelivered slot
inserts nothing the second time (ON CONFLICT DO NOTHING), so nothing is duplicated.

A row the database refuses (bad values, too large: probes/recording/run_rows.py) is stored at once
as a protocol_error stand-in. When the database is away, the write is retried with
back-off for a while; if it is still away, the row is spooled (probes/recording/run_spool.py: Redis,
or the worker's disk when Redis is away too), drained on the next successful write and
every minute by the rollup task. Either way the measurement reaches the table; the
rollup maintenance (dashboard/rollups.py) finds every new row by its id, late ones too.
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection

from probes.engine import RunResult, contract, reasons, sanitize, scrub
from probes.kinds import Measured
from probes.models import Price, WorkerCalibration
from probes.recording import live_secrets
from probes.recording.run_rows import (
    ROW_ERRORS,
    insert_or_stand_in,
    is_connection_error,
    is_row_error,
    refused_row,
)
from probes.recording.run_spool import SPOOL_KEY, SPOOL_REJECTED_KEY, drain_spool, spool

log = logging.getLogger(__name__)

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
            check_detail=scrub.cut(m.check_detail, 300),  # scrubbed, then cut
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
    fields["reason"] = reasons.classify(result.status, result.error)
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
    """Could our client have set this run's figures? Its measuring loop was late
    (engine/loop_lag.py), or its speed was near the worker's own measured ceiling."""
    if result.client_bound:
        return True
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


def scrubbed(fields: dict[str, Any]) -> dict[str, Any]:
    """The one scrub (README, "One door in"): every live secret replaced in every string,
    object key and value of the row, whatever field it hides in, before anything is
    written (the database, the spool, a stand-in's error)."""
    scrubber = live_scrubber()
    return {name: scrubber.value(value) for name, value in fields.items()}


def live_scrubber() -> scrub.Scrubber:
    """A scrubber of every live secret (its forms and pieces, scrub.py)."""
    return _scrubber_of(live_secrets.live_secrets())


@functools.lru_cache(maxsize=4)
def _scrubber_of(secrets: tuple[str, ...]) -> scrub.Scrubber:
    # The list changes at most once a minute (live_secrets): built once per list.
    return scrub.Scrubber(secrets)


def save(fields: dict[str, Any], retry_for_s: float = DB_RETRY_FOR_S) -> str:
    """Write one run: 'written', or 'spooled' (database away longer than retry_for_s).

    A row the database refuses (probes/recording/run_rows.py) is stored at once as its
    protocol_error stand-in; only a connection failure is retried, then spooled.
    """
    fields = scrubbed(fields)
    deadline = time.monotonic() + retry_for_s
    delay = 0.25
    while True:
        try:
            insert_or_stand_in(fields)
            break
        except Exception as exc:
            if not is_connection_error(exc):
                if not is_row_error(exc):
                    raise
                # Even the stand-in was refused: its identity cannot be stored.
                log.error("Run and its stand-in refused (%s); spooling it for a human", exc)
                spool(fields)
                return "spooled"
            # Drop the broken connection; Django opens a new one on the next query.
            connection.close()
            if time.monotonic() >= deadline:
                log.error("Database away for %.0f s; spooling the run", retry_for_s)
                spool(fields)
                return "spooled"
            log.warning("Database unavailable (%s); retrying in %.1f s", exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
    drain_spool()
    return "written"


def record(result: RunResult, ctx: RunContext, retry_for_s: float = DB_RETRY_FOR_S) -> str:
    # Every cut while the row (or its stand-in) is built scrubs every live secret first.
    with scrub.using(live_scrubber()):
        try:
            fields = run_fields(result, ctx)
        except ROW_ERRORS as exc:  # a value that cannot even become a column value
            fields = refused_row(run_identity(result, ctx) | {"status": result.status}, exc)
        return save(fields, retry_for_s)


# Spelled here too: callers know the recorder, not where it keeps runs.
__all__ = [
    "SPOOL_KEY",
    "SPOOL_REJECTED_KEY",
    "RunContext",
    "drain_spool",
    "live_scrubber",
    "record",
    "refused_row",
    "run_fields",
    "run_identity",
    "save",
    "scrubbed",
    "spool",
]
