"""Everything ever recorded per series, for /metrics' counters and histograms.

Prometheus counters and histograms must never go down, so they are read from rollups,
which outlive raw-run retention: from the lifetime snapshot (one row per series, built
hourly by dashboard/snapshots.py) while it covers exactly the rolled-up part of all of
time, else summed from every rollup row in Postgres; plus the raw runs newer than the
rollups. Histograms arrive already summed into Prometheus buckets
(dashboard/prom_buckets.py): the mapping is done in SQL, so a year of fine-grained
buckets never travels to Python.

Runs move from the raw tail into rollups as hours close with the same counts and the same
bucket (the raw tail is bucketed with the rollups' own formula), and each sample adds its
bucket's value to `_sum` on both sides, so nothing jumps when they do.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime

import orjson
from django.db import connection
from django.db.models import TextField
from django.db.models.functions import Cast
from django.utils import timezone

from dashboard import prom_buckets
from dashboard.histogram import _FLOOR_LOG, _LOG_STEP, GAMMA, bucket_sql
from dashboard.models import SnapshotBuild, WindowSnapshot
from dashboard.queries.aggregates import LIFETIME, Plan, Series, lifetime_plan, memoised
from probes.engine.contract import left_out_sql

TOKEN_KINDS = ("input", "output", "cached", "reasoning")


@dataclass
class Totals:
    status_counts: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KINDS, 0))
    cost_usd: float = 0.0
    # exported histogram → per-bucket counts (prom_buckets.size_of, not cumulative)
    buckets: dict[str, list[int]] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)  # exported histogram → seconds

    def add_bucket(self, histogram: str, index: int, n: int, total: float) -> None:
        counts = self.buckets.setdefault(histogram, [0] * prom_buckets.size_of(histogram))
        counts[index] += n
        self.sums[histogram] = self.sums.get(histogram, 0.0) + total

    def merge(self, other: Totals) -> None:
        for status, n in other.status_counts.items():
            self.status_counts[status] = self.status_counts.get(status, 0) + n
        for kind, n in other.tokens.items():
            self.tokens[kind] += n
        self.cost_usd += other.cost_usd
        for histogram, counts in other.buckets.items():
            mine = self.buckets.setdefault(histogram, [0] * len(counts))
            if len(mine) != len(counts):
                raise ValueError(f"{histogram}: bucket layouts differ")
            self.buckets[histogram] = list(map(operator.add, mine, counts))  # C-level: hot
            self.sums[histogram] = self.sums.get(histogram, 0.0) + other.sums[histogram]

    def copy(self) -> Totals:
        fresh = Totals()
        fresh.merge(self)
        return fresh


# -- the SQL ---------------------------------------------------------------------------------

# (exported histogram, inverse, rollup metric): the VALUES both readers unnest.
_SOURCES = [(name, inverse, metric) for name, (metric, inverse) in prom_buckets.HISTOGRAMS.items()]


def _array(values: list[int]) -> str:
    return "ARRAY[" + ",".join(str(v) for v in values) + "]::int[]"


# Stored bucket k → Prometheus bucket, and its value in seconds (prom_buckets.prom_index
# and stored_value_seconds, in SQL; a test checks they agree).
_INDEX_SQL = (
    f"CASE WHEN NOT inverse THEN width_bucket(k, {_array(prom_buckets.CUTS[False])}) "
    f"WHEN k <= 0 THEN {prom_buckets.INF[True]} "
    f"ELSE {prom_buckets.INF[True]} - width_bucket(k, {_array(prom_buckets.CUTS[True])}) END"
)
_VALUE = (
    f"(2 * power(10::float8, ({_FLOOR_LOG!r})::float8 + (k + 1) * ({_LOG_STEP!r})::float8)"
    f" / ({GAMMA + 1!r})::float8)"
)
_SECONDS_SQL = f"CASE WHEN inverse THEN 1 / {_VALUE} ELSE {_VALUE} / 1000 END"
_BUCKETS_SQL = f"""
SELECT endpoint_id, workload_id, region, h, {_INDEX_SQL} AS b, sum(n), sum(n * {_SECONDS_SQL})
  FROM ({{stored}}) AS s(endpoint_id, workload_id, region, h, inverse, k, n)
 GROUP BY 1, 2, 3, 4, 5
"""
_ROLLUP_SOURCES = ", ".join(f"('{h}', {inv}, r.hist_{m})" for h, inv, m in _SOURCES)
_ROLLUP_STORED = f"""
SELECT r.endpoint_id, r.workload_id, r.region, src.h, src.inverse, kv.key::int, kv.value::bigint
  FROM dashboard_runrollup r
 CROSS JOIN LATERAL (VALUES {_ROLLUP_SOURCES}) AS src(h, inverse, hist)
 CROSS JOIN LATERAL jsonb_each_text(src.hist) AS kv
 WHERE r.granularity = %(granularity)s AND r.bucket_start >= %(start)s
       AND r.bucket_start < %(end)s
"""
_ROLLUP_COUNTS = """
SELECT endpoint_id, workload_id, region, sum(sum_input_tokens), sum(sum_output_tokens),
       sum(sum_cached_tokens), sum(sum_reasoning_tokens), sum(sum_cost_usd)
  FROM dashboard_runrollup
 WHERE granularity = %(granularity)s AND bucket_start >= %(start)s AND bucket_start < %(end)s
 GROUP BY 1, 2, 3
"""
_ROLLUP_STATUS = """
SELECT r.endpoint_id, r.workload_id, r.region, kv.key, sum(kv.value::bigint)
  FROM dashboard_runrollup r CROSS JOIN LATERAL jsonb_each_text(r.status_counts) AS kv
 WHERE r.granularity = %(granularity)s AND r.bucket_start >= %(start)s
       AND r.bucket_start < %(end)s
 GROUP BY 1, 2, 3, 4
"""
# The raw tail, as the rollups read it: no group steps; speeds only of runs long enough
# to rank on speed; histograms of ok runs only.
_RAW_RUNS = """
SELECT * FROM probes_proberun
 WHERE started_at >= %(start)s AND started_at <= %(end)s AND role <> 'step'
"""
_RAW_SOURCES = ", ".join(
    f"('{h}', {inv}, " + f"CASE WHEN {left_out_sql(m)} THEN NULL ELSE {m} END" + ")"
    for h, inv, m in _SOURCES
)
_RAW_STORED = f"""
SELECT endpoint_id, workload_id, region, src.h, src.inverse, {bucket_sql("src.v")}, 1
  FROM ({_RAW_RUNS}) AS runs CROSS JOIN LATERAL (VALUES {_RAW_SOURCES}) AS src(h, inverse, v)
 WHERE status = 'ok' AND src.v IS NOT NULL
"""
_RAW_COUNTS = f"""
SELECT endpoint_id, workload_id, region, coalesce(sum(input_tokens), 0),
       coalesce(sum(output_tokens), 0), coalesce(sum(cached_input_tokens), 0),
       coalesce(sum(reasoning_tokens), 0), coalesce(sum(cost_usd), 0)
  FROM ({_RAW_RUNS}) AS runs GROUP BY 1, 2, 3
"""
_RAW_STATUS = f"""
SELECT endpoint_id, workload_id, region, status, count(*)
  FROM ({_RAW_RUNS}) AS runs GROUP BY 1, 2, 3, 4
"""


def _read(
    totals: dict[Series, Totals], counts_sql: str, status_sql: str, stored_sql: str, params
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(counts_sql, params)
        for endpoint, workload, region, *tokens, cost in cursor.fetchall():
            series = totals[(endpoint, workload, region)]
            for kind, n in zip(TOKEN_KINDS, tokens, strict=True):
                series.tokens[kind] += int(n or 0)
            series.cost_usd += float(cost or 0)
        cursor.execute(status_sql, params)
        for endpoint, workload, region, status, n in cursor.fetchall():
            counts = totals[(endpoint, workload, region)].status_counts
            counts[status] = counts.get(status, 0) + int(n)
        cursor.execute(_BUCKETS_SQL.format(stored=stored_sql), params)
        for endpoint, workload, region, histogram, index, n, seconds in cursor.fetchall():
            totals[(endpoint, workload, region)].add_bucket(histogram, index, int(n), seconds)


def from_rollups(plan: Plan) -> dict[Series, Totals]:
    """Every series' totals over the rolled-up part of `plan`, summed in Postgres."""
    totals: dict[Series, Totals] = defaultdict(Totals)
    for granularity, start, end in plan.rollups:
        params = {"granularity": granularity, "start": start, "end": end}
        _read(totals, _ROLLUP_COUNTS, _ROLLUP_STATUS, _ROLLUP_STORED, params)
    return dict(totals)


def raw_tail(start: datetime, end: datetime) -> dict[Series, Totals]:
    totals: dict[Series, Totals] = defaultdict(Totals)
    _read(totals, _RAW_COUNTS, _RAW_STATUS, _RAW_STORED, {"start": start, "end": end})
    return dict(totals)


def _from_snapshot(plan: Plan) -> dict[Series, Totals] | None:
    if not (
        plan.rollups
        and SnapshotBuild.objects.filter(
            window=LIFETIME, covers_from=plan.rollups[0][1], covers_to=plan.raw_from
        ).exists()
    ):
        return None
    # JSON columns as text, decoded with orjson: Django's per-value stdlib decoding was
    # most of a scrape's time at thousands of series.
    rows = (
        WindowSnapshot.objects.filter(window=LIFETIME)
        .annotate(
            _status=Cast("status_counts", TextField()), _buckets=Cast("prom_buckets", TextField())
        )
        .values_list(
            "endpoint_id",
            "workload_id",
            "region",
            "_status",
            "sum_input_tokens",
            "sum_output_tokens",
            "sum_cached_tokens",
            "sum_reasoning_tokens",
            "sum_cost_usd",
            "_buckets",
        )
    )
    out = {}
    for endpoint, workload, region, status_counts, *tokens, cost, stored in rows:
        stored = orjson.loads(stored)
        if any(len(v["buckets"]) != prom_buckets.size_of(h) for h, v in stored.items()):
            # Built before the bucket edges changed: sum the rollups until the next
            # hourly refresh rebuilds it with today's edges.
            return None
        out[(endpoint, workload, region)] = Totals(
            status_counts=orjson.loads(status_counts),
            tokens=dict(zip(TOKEN_KINDS, tokens, strict=True)),
            cost_usd=float(cost),
            buckets={h: v["buckets"] for h, v in stored.items()},
            sums={h: float(v["sum"]) for h, v in stored.items()},
        )
    return out


def snapshot_fields(totals: Totals) -> dict:
    """A lifetime WindowSnapshot row's fields for `totals` (the inverse of the reader)."""
    return {
        "runs": sum(totals.status_counts.values()),
        "ok_runs": totals.status_counts.get("ok", 0),
        "status_counts": totals.status_counts,
        "sum_input_tokens": totals.tokens["input"],
        "sum_output_tokens": totals.tokens["output"],
        "sum_cached_tokens": totals.tokens["cached"],
        "sum_reasoning_tokens": totals.tokens["reasoning"],
        "sum_cost_usd": totals.cost_usd,
        "prom_buckets": {
            h: {"buckets": counts, "sum": totals.sums[h]} for h, counts in totals.buckets.items()
        },
    }


def totals(now: datetime | None = None) -> dict[Series, Totals]:
    """Everything ever recorded, per endpoint × workload × region."""
    now = now or timezone.now()
    plan = lifetime_plan(now)
    out = _from_snapshot(plan)
    if out is None:
        out = memoised(
            ("lifetime-totals", tuple(plan.rollups)),
            lambda: from_rollups(plan),
            lambda memo: {series: t.copy() for series, t in memo.items()},
        )
    for series, tail in raw_tail(plan.raw_from, now).items():
        out.setdefault(series, Totals()).merge(tail)
    return out
