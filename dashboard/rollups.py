"""Maintain RunRollup (hourly and daily) from raw ProbeRun rows.

A bucket is always recomputed whole from the raw runs it covers, never incremented, so
recomputing is idempotent: a run written twice by accident, late or out of order still
gives the right rollup. The work happens in one SQL statement per range: Postgres
buckets every sample with the same formula as dashboard/histogram.py (checked by a
test), so a year of runs rebuilds in minutes instead of streaming every row to Python.

Which buckets to recompute:
- every minute, the current and previous hour of every series (runs as they arrive);
- buckets marked dirty by recording.py, for runs that arrive late (written after the
  database came back, or a slot redelivered an hour later);
- everything, on demand, with `manage.py rebuild_rollups`.

Buckets older than the oldest raw run are never touched: raw runs are pruned after the
retention period, and their rollups are then the only record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta

from django.db import connection, transaction

from dashboard import snapshots
from dashboard.histogram import _FLOOR_LOG, _LOG_STEP, FLOOR
from dashboard.models import RunRollup
from probes.models import ProbeRun

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
DIRTY_KEY = "inferwatch:rollups:dirty"

Series = tuple[int, int, str]  # endpoint_id, workload_id, region

# dashboard/histogram.bucket_of, in SQL. Constants come from the Python module so the
# two can never drift apart; repr() of a float is exact.
_BUCKET_SQL = (
    f"CASE WHEN m.v <= {FLOOR!r}::float8 THEN 0 "
    f"ELSE floor((log(m.v) - ({_FLOOR_LOG!r})::float8) / ({_LOG_STEP!r})::float8)::int END"
)

# One pass, no joins (join estimates on a freshly loaded table can be wildly off): the
# status rows and the histogram rows of every bucket are grouped together once.
_UPSERT_SQL = f"""
WITH runs AS (
    SELECT endpoint_id, workload_id, region,
           date_trunc(%(unit)s, started_at, 'UTC') AS bucket_start,
           started_at, status, output_tokens, cost_usd,
           ttft_ms, ttfat_ms, e2e_ms,
           CASE WHEN short_output OR stopped_short THEN NULL ELSE output_tps END AS output_tps
      FROM probes_proberun
     -- A group's requests ("step") are not ranked: its summary row ("group") is.
     WHERE started_at >= %(start)s AND started_at < %(end)s AND role <> 'step'
           {{series_filter}}
),
parts AS (
    SELECT endpoint_id, workload_id, region, bucket_start, 'status' AS kind, status AS k,
           count(*) AS n, sum(output_tokens) AS output_tokens, sum(cost_usd) AS cost,
           max(started_at) AS last_run_at
      FROM runs GROUP BY 1, 2, 3, 4, 6
    UNION ALL
    SELECT endpoint_id, workload_id, region, bucket_start, m.metric, ({_BUCKET_SQL})::text,
           count(*), NULL, NULL, NULL
      FROM runs CROSS JOIN LATERAL (VALUES
           ('ttft_ms', ttft_ms), ('ttfat_ms', ttfat_ms),
           ('output_tps', output_tps), ('e2e_ms', e2e_ms)) AS m(metric, v)
     WHERE status = 'ok' AND m.v IS NOT NULL
     GROUP BY 1, 2, 3, 4, 5, 6
)
INSERT INTO dashboard_runrollup (
    granularity, bucket_start, endpoint_id, workload_id, region, runs, ok_runs,
    status_counts, hist_ttft_ms, hist_ttfat_ms, hist_output_tps, hist_e2e_ms,
    sum_output_tokens, sum_cost_usd, last_run_at)
SELECT %(granularity)s, bucket_start, endpoint_id, workload_id, region,
       sum(n) FILTER (WHERE kind = 'status'),
       coalesce(sum(n) FILTER (WHERE kind = 'status' AND k = 'ok'), 0),
       jsonb_object_agg(k, n) FILTER (WHERE kind = 'status'),
       coalesce(jsonb_object_agg(k, n) FILTER (WHERE kind = 'ttft_ms'), '{{{{}}}}'),
       coalesce(jsonb_object_agg(k, n) FILTER (WHERE kind = 'ttfat_ms'), '{{{{}}}}'),
       coalesce(jsonb_object_agg(k, n) FILTER (WHERE kind = 'output_tps'), '{{{{}}}}'),
       coalesce(jsonb_object_agg(k, n) FILTER (WHERE kind = 'e2e_ms'), '{{{{}}}}'),
       coalesce(sum(output_tokens), 0), coalesce(sum(cost), 0), max(last_run_at)
  FROM parts
 GROUP BY endpoint_id, workload_id, region, bucket_start
ON CONFLICT (granularity, endpoint_id, workload_id, region, bucket_start) DO UPDATE SET
    runs = EXCLUDED.runs, ok_runs = EXCLUDED.ok_runs, status_counts = EXCLUDED.status_counts,
    hist_ttft_ms = EXCLUDED.hist_ttft_ms, hist_ttfat_ms = EXCLUDED.hist_ttfat_ms,
    hist_output_tps = EXCLUDED.hist_output_tps, hist_e2e_ms = EXCLUDED.hist_e2e_ms,
    sum_output_tokens = EXCLUDED.sum_output_tokens, sum_cost_usd = EXCLUDED.sum_cost_usd,
    last_run_at = EXCLUDED.last_run_at
"""

_SERIES_FILTER = (
    "AND endpoint_id = %(endpoint)s AND workload_id = %(workload)s AND region = %(region)s"
)


def floor_hour(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def floor_day(when: datetime) -> datetime:
    return floor_hour(when).replace(hour=0)


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
    as it was or rebuilt, and running it again finishes the job.
    """
    oldest = oldest_raw_day()
    if oldest is None:
        return
    start = max(floor_day(start), oldest) if start else oldest
    end = end or floor_hour(datetime.now(UTC)) + HOUR
    cursor = start
    while cursor < end:
        stop = min(cursor + chunk, end)
        recompute_span(cursor, stop)
        if progress:
            progress(f"rollups up to {stop:%Y-%m-%d %H:%M} ({(stop - start) / (end - start):.0%})")
        cursor = stop


# -- keeping up as runs arrive ---------------------------------------------------------------


def mark_dirty(redis, endpoint_id: int, workload_id: int, region: str, when: datetime) -> None:
    """Remember that a bucket needs recomputing (a run landed in it)."""
    redis.sadd(DIRTY_KEY, f"{endpoint_id}|{workload_id}|{region}|{floor_hour(when).isoformat()}")


def _parse_dirty(members: Iterable[bytes | str]) -> set[tuple[Series, datetime]]:
    parsed = set()
    for member in members:
        text = member.decode() if isinstance(member, bytes) else member
        try:
            endpoint, workload, region, hour = text.split("|")
            parsed.add(((int(endpoint), int(workload), region), datetime.fromisoformat(hour)))
        except ValueError:
            log.warning("Ignoring a malformed dirty-rollup mark: %r", text)
    return parsed


def refresh(redis=None, now: datetime | None = None) -> int:
    """The periodic maintenance: recent hours of every series, then dirty buckets.

    Returns the number of dirty buckets recomputed.
    """
    now = now or datetime.now(UTC)
    recompute_span(floor_hour(now) - HOUR, now)
    if redis is None:
        return 0
    members = redis.srandmember(DIRTY_KEY, 1000) or []
    done = 0
    for member in members:
        # Unmark first: a run landing while we recompute marks the bucket again.
        redis.srem(DIRTY_KEY, member)
        for series, hour in _parse_dirty([member]):
            if hour >= floor_hour(now) - HOUR:
                continue  # covered by the sweep above
            try:
                recompute_span(hour, hour + HOUR, series)
            except Exception:
                redis.sadd(DIRTY_KEY, member)
                raise
            done += 1
    return done
