"""Maintain RunRollup (hourly and daily) from raw ProbeRun rows.

A bucket is always recomputed whole from the raw runs it covers, never incremented, so
recomputing is idempotent: a run written twice by accident, late or out of order still
gives the right rollup. The work happens in one SQL statement per range: Postgres
buckets every sample with the same formula as dashboard/histogram.py (checked by a
test), so a year of runs rebuilds in minutes instead of streaming every row to Python.

Which buckets to recompute:
- every minute, the current and previous hour of every series (runs as they arrive);
- the buckets of runs that arrive late (written after the database came back, or a slot
  redelivered an hour later): the maintenance reads the runs added since its last pass
  by id (a watermark, RollupWatermark), so probes never have to tell the read side;
- everything, on demand, with `manage.py rebuild_rollups`.

Buckets older than the oldest raw run are never touched: raw runs are pruned after the
retention period, and their rollups are then the only record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction

from dashboard import snapshots
from dashboard.histogram import bucket_sql
from dashboard.models import RollupWatermark, RunRollup
from probes.engine.contract import ROLLUP_METRICS, USAGE_TOKEN_SOURCES, left_out_sql
from probes.models import ProbeRun
from probes.platform.timefloors import floor_day, floor_hour

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# Runs read per maintenance pass at most (by id): a burst of late runs is worked off
# over a few minutes instead of one long task.
NEW_RUNS_BATCH = 20_000

Series = tuple[int, int, str]  # endpoint_id, workload_id, region

_BUCKET_SQL = bucket_sql("m.v")

# A metric counts only the runs the contract lets it take (counts_for_metric): never a
# client-bound run; speeds only of runs long enough to rank.
_METRIC_COLUMNS = ", ".join(
    f"CASE WHEN {left_out_sql(m)} THEN NULL ELSE {m} END AS {m}" for m in ROLLUP_METRICS
)
# contract.approx_tokens, in SQL: ok runs whose counts are not the provider's usage.
_USAGE_SOURCES = ", ".join(f"'{source}'" for source in USAGE_TOKEN_SOURCES)
_APPROX_SQL = f"status = 'ok' AND coalesce(token_source, '') NOT IN ({_USAGE_SOURCES})"
# contract.answer_checked, in SQL: ok runs whose answer the workload checked.
_CHECKED_SQL = "status = 'ok' AND output_valid IS NOT NULL"
_METRIC_VALUES = ", ".join(f"('{m}', {m})" for m in ROLLUP_METRICS)
_HIST_COLUMNS = ", ".join(f"hist_{m}" for m in ROLLUP_METRICS)
_HIST_AGGREGATES = ",\n       ".join(
    f"coalesce(jsonb_object_agg(k, n) FILTER (WHERE kind = '{m}'), '{{{{}}}}')"
    for m in ROLLUP_METRICS
)
_HIST_UPDATES = ", ".join(f"hist_{m} = EXCLUDED.hist_{m}" for m in ROLLUP_METRICS)

# One pass, no joins (join estimates on a freshly loaded table can be wildly off): the
# status rows and the histogram rows of every bucket are grouped together once.
_UPSERT_SQL = f"""
WITH runs AS (
    SELECT endpoint_id, workload_id, region,
           date_trunc(%(unit)s, started_at, 'UTC') AS bucket_start,
           started_at, status, output_tokens, input_tokens, cached_input_tokens,
           reasoning_tokens, cost_usd, token_source, output_valid, client_bound,
           {_METRIC_COLUMNS}
      FROM probes_proberun
     -- A group's requests ("step") are not ranked: its summary row ("group") is.
     WHERE started_at >= %(start)s AND started_at < %(end)s AND role <> 'step'
           {{series_filter}}
),
parts AS (
    SELECT endpoint_id, workload_id, region, bucket_start, 'status' AS kind, status AS k,
           count(*) AS n, sum(output_tokens) AS output_tokens, sum(input_tokens) AS input_tokens,
           sum(cached_input_tokens) AS cached_tokens, sum(reasoning_tokens) AS reasoning_tokens,
           sum(cost_usd) AS cost,
           count(*) FILTER (WHERE {_APPROX_SQL}) AS approx,
           count(*) FILTER (WHERE {_CHECKED_SQL}) AS checked,
           count(*) FILTER (WHERE {_CHECKED_SQL} AND output_valid) AS valid,
           count(*) FILTER (WHERE status = 'ok' AND client_bound) AS bound,
           max(started_at) AS last_run_at
      FROM runs GROUP BY 1, 2, 3, 4, 6
    UNION ALL
    SELECT endpoint_id, workload_id, region, bucket_start, m.metric, ({_BUCKET_SQL})::text,
           count(*), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
      FROM runs CROSS JOIN LATERAL (VALUES {_METRIC_VALUES}) AS m(metric, v)
     WHERE status = 'ok' AND m.v IS NOT NULL
     GROUP BY 1, 2, 3, 4, 5, 6
)
INSERT INTO dashboard_runrollup (
    granularity, bucket_start, endpoint_id, workload_id, region, runs, ok_runs,
    status_counts, {_HIST_COLUMNS},
    sum_output_tokens, sum_input_tokens, sum_cached_tokens, sum_reasoning_tokens,
    sum_cost_usd, approx_token_runs, checked_runs, valid_runs, client_bound_runs, last_run_at)
SELECT %(granularity)s, bucket_start, endpoint_id, workload_id, region,
       sum(n) FILTER (WHERE kind = 'status'),
       coalesce(sum(n) FILTER (WHERE kind = 'status' AND k = 'ok'), 0),
       jsonb_object_agg(k, n) FILTER (WHERE kind = 'status'),
       {_HIST_AGGREGATES},
       coalesce(sum(output_tokens), 0), coalesce(sum(input_tokens), 0),
       coalesce(sum(cached_tokens), 0), coalesce(sum(reasoning_tokens), 0),
       coalesce(sum(cost), 0), coalesce(sum(approx), 0),
       coalesce(sum(checked), 0), coalesce(sum(valid), 0), coalesce(sum(bound), 0),
       max(last_run_at)
  FROM parts
 GROUP BY endpoint_id, workload_id, region, bucket_start
ON CONFLICT (granularity, endpoint_id, workload_id, region, bucket_start) DO UPDATE SET
    runs = EXCLUDED.runs, ok_runs = EXCLUDED.ok_runs, status_counts = EXCLUDED.status_counts,
    {_HIST_UPDATES},
    sum_output_tokens = EXCLUDED.sum_output_tokens, sum_input_tokens = EXCLUDED.sum_input_tokens,
    sum_cached_tokens = EXCLUDED.sum_cached_tokens,
    sum_reasoning_tokens = EXCLUDED.sum_reasoning_tokens, sum_cost_usd = EXCLUDED.sum_cost_usd,
    approx_token_runs = EXCLUDED.approx_token_runs, checked_runs = EXCLUDED.checked_runs,
    valid_runs = EXCLUDED.valid_runs, client_bound_runs = EXCLUDED.client_bound_runs,
    last_run_at = EXCLUDED.last_run_at
"""

_SERIES_FILTER = (
    "AND endpoint_id = %(endpoint)s AND workload_id = %(workload)s AND region = %(region)s"
)


def recompute(
    granularity: str, start: datetime, end: datetime, series: Series | None = None
) -> int:
    """Recompute the `granularity` buckets in [start, end) from raw runs; returns rows.

    `start` and `end` must be bucket boundaries. Buckets left without runs are deleted.
    Call inside a transaction when several ranges must change together. Window snapshots
    that read these buckets are invalidated in the same transaction (dashboard/snapshots.py).
    """
    unit = "hour" if granularity == RunRollup.HOUR else "day"
    params = {"unit": unit, "start": start, "end": end, "granularity": granularity}
    stale = RunRollup.objects.filter(
        granularity=granularity, bucket_start__gte=start, bucket_start__lt=end
    )
    if series:
        params.update(endpoint=series[0], workload=series[1], region=series[2])
        stale = stale.filter(endpoint_id=series[0], workload_id=series[1], region=series[2])
    sql = _UPSERT_SQL.format(series_filter=_SERIES_FILTER if series else "")
    with transaction.atomic():
        snapshots.share_lock()
        stale.delete()
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            written = cursor.rowcount
        snapshots.invalidate(granularity, start, end)
        return written


def oldest_raw_day() -> datetime | None:
    first = ProbeRun.objects.order_by("started_at").values_list("started_at", flat=True).first()
    return floor_day(first) if first else None


def recompute_span(start: datetime, end: datetime, series: Series | None = None) -> None:
    """Hourly buckets over [start, end) and daily buckets over the days they touch."""
    oldest = oldest_raw_day()
    if oldest is None:
        return
    # Never recompute what raw runs no longer cover (pruned: the rollup is the record).
    day_start = max(floor_day(start), oldest)
    hour_start = max(floor_hour(start), oldest)
    day_end = floor_day(end - timedelta(microseconds=1)) + DAY
    hour_end = floor_hour(end - timedelta(microseconds=1)) + HOUR
    if hour_start >= hour_end:
        return
    with transaction.atomic():
        recompute(RunRollup.HOUR, hour_start, hour_end, series)
        recompute(RunRollup.DAY, day_start, day_end, series)


def rebuild(
    start: datetime | None = None,
    end: datetime | None = None,
    progress: Callable[[str], None] | None = None,
    chunk: timedelta = timedelta(days=7),
) -> None:
    """Recompute every bucket in [start, end) (default: all raw runs), a week at a time.

    Each chunk is its own transaction: an interrupted rebuild leaves every bucket either
    as it was or rebuilt, and running it again finishes the job. A rebuild of everything
    also moves the maintenance's watermark past the runs it covered.
    """
    oldest = oldest_raw_day()
    if oldest is None:
        return
    newest_id = ProbeRun.objects.order_by("-id").values_list("id", flat=True).first()
    covers_all = start is None and end is None
    start = max(floor_day(start), oldest) if start else oldest
    end = end or floor_hour(datetime.now(UTC)) + HOUR
    cursor = start
    while cursor < end:
        stop = min(cursor + chunk, end)
        recompute_span(cursor, stop)
        if progress:
            progress(f"rollups up to {stop:%Y-%m-%d %H:%M} ({(stop - start) / (end - start):.0%})")
        cursor = stop
    if covers_all:
        mark_runs_read(newest_id)


# -- keeping up as runs arrive ---------------------------------------------------------------


def _watermark() -> RollupWatermark:
    """The row, created at the newest run when missing (a fresh or flushed database):
    older runs were rolled up by the recent-hours sweep or a rebuild."""
    newest = ProbeRun.objects.order_by("-id").values_list("id", flat=True).first() or 0
    row, _ = RollupWatermark.objects.get_or_create(
        name="runs", defaults={"last_run_id": newest, "previous_run_id": newest}
    )
    return row


def mark_runs_read(up_to: int | None = None) -> None:
    """Skip the runs up to id `up_to` (default: all): a rebuild just covered them."""
    if up_to is None:
        up_to = ProbeRun.objects.order_by("-id").values_list("id", flat=True).first() or 0
    row = _watermark()
    if up_to > row.last_run_id:
        RollupWatermark.objects.filter(pk=row.pk).update(last_run_id=up_to, previous_run_id=up_to)


def new_run_buckets(limit: int = NEW_RUNS_BATCH) -> tuple[set[tuple[Series, datetime]], int]:
    """The (series, hour) buckets of runs added since the pass before the last one, and
    the highest id read.

    Reading again from the pass before the last, not from the last: ids are drawn when a
    run's INSERT starts but become visible when it commits, so a run still committing
    during one pass can be visible with a lower id than runs that pass read. One pass
    later it is committed (an INSERT of one row takes microseconds) and read then.
    """
    row = _watermark()
    ids = (
        ProbeRun.objects.filter(id__gt=row.previous_run_id)
        .order_by("id")
        .values_list("id", "endpoint_id", "workload_id", "region", "started_at")[:limit]
    )
    buckets: set[tuple[Series, datetime]] = set()
    top = row.last_run_id
    for run_id, endpoint_id, workload_id, region, started_at in ids:
        buckets.add(((endpoint_id, workload_id, region), floor_hour(started_at)))
        top = max(top, run_id)
    return buckets, top


def _advance(read_to: int) -> None:
    row = _watermark()
    RollupWatermark.objects.filter(pk=row.pk).update(
        previous_run_id=row.last_run_id, last_run_id=max(read_to, row.last_run_id)
    )


def refresh(now: datetime | None = None) -> int:
    """The periodic maintenance: recent hours of every series, then the older buckets
    that new runs landed in. Returns the number of older buckets recomputed."""
    now = now or datetime.now(UTC)
    recent_from = floor_hour(now) - HOUR
    recompute_span(recent_from, now)
    buckets, read_to = new_run_buckets()
    done = 0
    for series, hour in sorted(buckets, key=lambda b: (b[1], b[0])):
        if hour >= recent_from:
            continue  # covered by the sweep above
        recompute_span(hour, hour + HOUR, series)
        done += 1
    _advance(read_to)  # only once every bucket is done: a failed pass is read again
    return done
