"""Window snapshots: each leaderboard window's rolled-up part, merged once per hour.

(And the lifetime totals the /metrics counters and histograms read, summed once per hour.)

A leaderboard over 30 days merges, per series, 29 daily and up to 46 hourly rollup rows
for its figures and one histogram per day for its sparkline: tens of thousands of
histograms per page at a few hundred series. Those rows only change when the window
moves (every hour: its start and the raw tail's start are whole hours) or when a late
run makes a rollup bucket inside it recompute. So the maintenance task merges them here
once per hour into WindowSnapshot rows (dashboard/models.py), and readers
(dashboard/queries/aggregates.py) use a snapshot only while its SnapshotBuild says it covers
exactly their window's rolled-up part; otherwise they read rollups as before.

The merge is the same code the readers use on rollups (aggregates.read_rollups), so a page
shows the same figures, to the sample, either way. Rollups stay the source of truth:
`manage.py rebuild_rollups` recomputes them, which invalidates the snapshots it touches,
and the next maintenance rebuilds those.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from datetime import UTC, datetime

from django.db import connection, transaction
from django.db.models import Q

from dashboard.models import ROLLUP_METRICS, RunRollup, SnapshotBuild, WindowSnapshot
from dashboard.queries import aggregates, lifetime
from dashboard.queries import leaderboard as leaderboards

log = logging.getLogger(__name__)

# Readers (rollup recomputes) share this lock; a snapshot build takes it alone, so a
# rollup bucket never changes between the build reading it and the build being marked
# current (which would leave a stale snapshot marked current for an hour).
LOCK_KEY = 0x1F_5A_AB_01

SERIES_FIELDS = ("endpoint_id", "workload_id", "region")


def windows(now: datetime | None = None) -> list[str]:
    """Leaderboard windows that read rollups at all (1 h reads raw runs only)."""
    now = now or datetime.now(UTC)
    return [w for w in aggregates.LEADERBOARD_WINDOWS if bounds(w, now) is not None]


def bounds(window: str, now: datetime) -> tuple[datetime, datetime] | None:
    """The stretch [from, to) of rollups a window ending `now` reads."""
    plan = aggregates.plan_window(now - aggregates.LEADERBOARD_WINDOWS[window], now)
    return (plan.rollups[0][1], plan.raw_from) if plan.rollups else None


def refresh(now: datetime | None = None) -> list[str]:
    """Build the snapshot of every window whose current one is missing or out of date
    (the hour turned, or a recompute invalidated it); the windows built."""
    now = now or datetime.now(UTC)
    current = {b.window: (b.covers_from, b.covers_to) for b in SnapshotBuild.objects.all()}
    built = []
    for window in windows(now):
        if current.get(window) != bounds(window, now):
            build(window, now)
            built.append(window)
    lifetime = aggregates.lifetime_plan(now)
    if lifetime.rollups and current.get(aggregates.LIFETIME) != _covers(lifetime):
        build_lifetime(now)
        built.append(aggregates.LIFETIME)
    return built


def _covers(plan: aggregates.Plan) -> tuple[datetime, datetime]:
    return (plan.rollups[0][1], plan.raw_from)


def build(window: str, now: datetime) -> int:
    """Merge the rollups of `window` ending `now` into snapshot rows; the rows written."""
    started = time.perf_counter()
    start = now - aggregates.LEADERBOARD_WINDOWS[window]
    covers = bounds(window, now)
    if covers is None:
        raise ValueError(f"The {window} window reads raw runs only: nothing to snapshot.")
    bucket = leaderboards.sparkline_bucket(window)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
        totals = _merged(aggregates.plan_window(start, now), "none", ROLLUP_METRICS)
        spark = _merged(
            aggregates.plan_window(start, now, use_days=bucket != "hour"), bucket, ("output_tps",)
        )
        rows = _rows(window, covers[1], totals, spark)
        _replace(window, rows, covers, started)
    return len(rows)


def build_lifetime(now: datetime) -> int:
    """Every series' totals over every rollup (the /metrics counters and histograms,
    dashboard/queries/lifetime.py); rows written. Summed in Postgres: a year of rollups
    takes a fraction of a second."""
    started = time.perf_counter()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
        plan = aggregates.lifetime_plan(now)  # after the lock: rollups cannot move now
        if not plan.rollups:
            return 0
        rows = [
            WindowSnapshot(
                window=aggregates.LIFETIME,
                endpoint_id=series[0],
                workload_id=series[1],
                region=series[2],
                **lifetime.snapshot_fields(totals),
            )
            for series, totals in lifetime.from_rollups(plan).items()
        ]
        _replace(aggregates.LIFETIME, rows, _covers(plan), started)
    return len(rows)


def _replace(
    window: str, rows: list[WindowSnapshot], covers: tuple[datetime, datetime], started: float
) -> float:
    """Swap in a window's new rows and mark them current (inside the build's transaction)."""
    WindowSnapshot.objects.filter(window=window).delete()
    WindowSnapshot.objects.bulk_create(rows, batch_size=500)
    elapsed_ms = (time.perf_counter() - started) * 1000
    SnapshotBuild.objects.update_or_create(
        window=window,
        defaults={
            "covers_from": covers[0],
            "covers_to": covers[1],
            "built_at": datetime.now(UTC),
            "build_ms": elapsed_ms,
        },
    )
    log.info("Snapshot %s: %d rows in %.0f ms", window, len(rows), elapsed_ms)
    return elapsed_ms


def invalidate(granularity: str, start: datetime, end: datetime) -> None:
    """Forget snapshots that read a rollup bucket of `granularity` in [start, end).

    Call inside the transaction that recomputes those buckets, which must hold the shared
    lock (see `share_lock`). Snapshots read hourly rows in [from, to) and daily rows of
    whole days inside it, so the routine minute-by-minute recompute of the newest hours
    and of today, which lie at or after `to`, leaves them alone.
    """
    if granularity == RunRollup.HOUR:
        touched = Q(covers_from__lt=end, covers_to__gt=start)
    else:
        touched = Q(covers_from__lt=end, covers_to__gte=start + aggregates.DAY)
    SnapshotBuild.objects.filter(touched).delete()


def share_lock() -> None:
    """Take the lock rollup recomputes share (until the end of the transaction)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock_shared(%s)", [LOCK_KEY])


Merged = dict[tuple[tuple, datetime | None], aggregates.Agg]


def _merged(plan: aggregates.Plan, bucket: str, metrics: tuple[str, ...]) -> Merged:
    ranges = Q()
    for granularity, lo, hi in plan.rollups:
        ranges |= Q(granularity=granularity, bucket_start__gte=lo, bucket_start__lt=hi)
    return aggregates.read_rollups(RunRollup.objects.filter(ranges), SERIES_FIELDS, bucket, metrics)


def _rows(window: str, covers_to: datetime, totals: Merged, spark: Merged) -> list[WindowSnapshot]:
    """One row per series, and one per endpoint × workload over all regions."""
    all_regions: dict[tuple, aggregates.Agg] = defaultdict(aggregates.Agg)
    for (series, _), agg in totals.items():
        all_regions[(*series[:2], WindowSnapshot.ALL_REGIONS)].merge(agg)
    spark_all: Merged = defaultdict(aggregates.Agg)
    for (series, when), agg in spark.items():
        spark_all[((*series[:2], WindowSnapshot.ALL_REGIONS), when)].merge(agg)
    buckets: dict[tuple, list[tuple[datetime, aggregates.Agg]]] = defaultdict(list)
    for (series, when), agg in [*spark.items(), *spark_all.items()]:
        buckets[series].append((when, agg))

    span = aggregates.HOUR if leaderboards.sparkline_bucket(window) == "hour" else aggregates.DAY
    rows = []
    for series, agg in [*((s, a) for (s, _), a in totals.items()), *all_regions.items()]:
        points, open_bucket = [], None
        for when, bucket_agg in sorted(buckets.get(series, []), key=lambda p: p[0]):
            if when + span <= covers_to:
                points.append([when.timestamp(), bucket_agg.percentile("output_tps", 50)])
            else:  # the day the snapshot ends in: more runs come from the raw tail
                open_bucket = [when.timestamp(), bucket_agg.hists["output_tps"]]
        rows.append(
            WindowSnapshot(
                window=window,
                endpoint_id=series[0],
                workload_id=series[1],
                region=series[2],
                runs=agg.runs,
                ok_runs=agg.ok_runs,
                status_counts=agg.status_counts,
                hists=agg.hists,
                sum_output_tokens=agg.sum_output_tokens,
                sum_cost_usd=agg.sum_cost_usd,
                **agg.run_counts(),
                last_run_at=agg.last_run_at,
                spark_points=points,
                spark_open=open_bucket,
            )
        )
    return rows
