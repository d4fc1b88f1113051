"""Aggregates: the windows, which storage answers which part of one (the plan), and
Agg, the mergeable figures of a set of runs, read from rollups, snapshots and raw runs.

Long windows read RunRollup (daily rows for whole days, hourly rows for the ragged
edges); the newest stretch, which rollups may not cover yet, reads raw ProbeRun rows.
Both are turned into the same mergeable histograms (dashboard/histogram.py), so a
percentile over any window is one merge, never a median of medians.

Leaderboard windows (and /metrics' 24 h and lifetime figures) read their rolled-up part
from window snapshots instead while one matches (dashboard/snapshots.py): the same
merge, done once per hour by the maintenance task rather than on every page view.
"""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_left
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import accumulate
from typing import TypeVar

import orjson
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from dashboard import histogram
from dashboard.definitions import PERCENTILES
from dashboard.models import ROLLUP_METRICS, RunRollup, SnapshotBuild, WindowSnapshot
from probes.engine.contract import answer_checked, approx_tokens, counts_for_metric
from probes.models import ProbeRun, Workload
from probes.platform.timefloors import floor_day, floor_hour

T = TypeVar("T")
K = TypeVar("K")

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
LEADERBOARD_WINDOWS: dict[str, timedelta] = {
    "1h": HOUR,
    "24h": 24 * HOUR,
    "72h": 72 * HOUR,
    "7d": 7 * DAY,
    "30d": 30 * DAY,
}
# History charts also offer 6 h (a morning's runs, one point each) and 90 d.
HISTORY_WINDOWS: dict[str, timedelta] = {
    "1h": HOUR,
    "6h": 6 * HOUR,
    **{name: span for name, span in LEADERBOARD_WINDOWS.items() if name != "1h"},
    "90d": 90 * DAY,
}
DEFAULT_WINDOW = "72h"
# The snapshot of all of time (/metrics counters), beside the leaderboard windows'.
LIFETIME = "lifetime"
# The leaderboard's: a page reached from the board shows the same stretch of time.
DEFAULT_HISTORY_WINDOW = DEFAULT_WINDOW
ALL = "all"

# Rollups of the last RAW_TAIL hours may still be filling in, so those hours come from
# raw runs; older hours come from rollups.
RAW_TAIL = HOUR


@dataclass(frozen=True)
class Plan:
    """Which storage answers which part of [start, now]."""

    rollups: list[tuple[str, datetime, datetime]]  # (granularity, from, to) half-open
    raw_from: datetime


def plan_window(start: datetime, now: datetime, *, use_days: bool = True) -> Plan:
    """Daily rollups for whole days, hourly ones for the edges, raw runs for the tail.

    The start is rounded down to the hour: a window covers whole hours plus the tail.
    """
    raw_from = floor_hour(now) - RAW_TAIL
    if start >= raw_from:
        return Plan(rollups=[], raw_from=start)
    start = floor_hour(start)
    ranges: list[tuple[str, datetime, datetime]] = []
    first_day = floor_day(start) if floor_day(start) == start else floor_day(start) + DAY
    last_day = floor_day(raw_from)
    if use_days and first_day < last_day:
        if start < first_day:
            ranges.append((RunRollup.HOUR, start, first_day))
        ranges.append((RunRollup.DAY, first_day, last_day))
        if last_day < raw_from:
            ranges.append((RunRollup.HOUR, last_day, raw_from))
    else:
        ranges.append((RunRollup.HOUR, start, raw_from))
    return Plan(rollups=ranges, raw_from=raw_from)


# Counts of kinds of ok runs, rolled up beside the histograms (RunRollup and
# WindowSnapshot columns of these names) and summed wherever aggregates merge.
RUN_COUNTS = ("approx_token_runs", "checked_runs", "valid_runs", "client_bound_runs")


@dataclass
class Agg:
    """Everything known about a set of runs: counts, statuses and metric histograms."""

    runs: int = 0
    ok_runs: int = 0
    status_counts: dict[str, int] = field(default_factory=dict)
    hists: dict[str, dict[str, int]] = field(
        default_factory=lambda: {m: {} for m in ROLLUP_METRICS}
    )
    last_run_at: datetime | None = None
    sum_output_tokens: int = 0
    sum_cost_usd: Decimal = Decimal(0)
    # RUN_COUNTS. Ok runs whose token counts are not the provider's usage
    # (contract.approx_tokens); ok runs whose answer was checked, and the valid ones
    # (contract.answer_checked).
    approx_token_runs: int = 0
    checked_runs: int = 0
    valid_runs: int = 0
    # Ok runs left out of latency and speed statistics because our client may have set
    # them (client_bound): the boards say how many.
    client_bound_runs: int = 0
    # The raw values added one by one (add_value), per metric: while a metric has only
    # those (no rolled-up histogram merged in), its percentiles are exact, not a bucket's.
    exact: dict[str, list[float]] = field(default_factory=dict, repr=False)
    rolled_up: set[str] = field(default_factory=set, repr=False)
    # Sorted buckets and running counts per metric, built on the first percentile asked.
    _cdf: dict[str, tuple[list[int], list[int]]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def copy(self) -> Agg:
        return Agg(
            runs=self.runs,
            ok_runs=self.ok_runs,
            status_counts=dict(self.status_counts),
            hists={m: dict(h) for m, h in self.hists.items()},
            last_run_at=self.last_run_at,
            sum_output_tokens=self.sum_output_tokens,
            sum_cost_usd=self.sum_cost_usd,
            **self.run_counts(),
            exact={m: list(v) for m, v in self.exact.items()},
            rolled_up=set(self.rolled_up),
        )

    def run_counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in RUN_COUNTS}

    def add_run_counts(self, counts: Iterable[int]) -> None:
        """Add RUN_COUNTS, given in that order (a rollup or snapshot row's columns)."""
        for name, n in zip(RUN_COUNTS, counts, strict=True):
            setattr(self, name, getattr(self, name) + n)

    def add_counts(self, status_counts: Mapping[str, int]) -> None:
        for status, n in status_counts.items():
            self.status_counts[status] = self.status_counts.get(status, 0) + n

    def add_hist(self, metric: str, hist: Mapping[str, int]) -> None:
        self._cdf.pop(metric, None)
        if hist:
            self.rolled_up.add(metric)
        target = self.hists[metric]
        if not target:  # the common first merge: a copy, at C speed
            target.update(hist)
            return
        for key, n in hist.items():
            target[key] = target.get(key, 0) + n

    def add_value(self, metric: str, value: float | None) -> None:
        if value is not None:
            self._cdf.pop(metric, None)
            key = str(histogram.bucket_of(value))
            target = self.hists[metric]
            target[key] = target.get(key, 0) + 1
            self.exact.setdefault(metric, []).append(value)

    def seen(self, at: datetime | None) -> None:
        if at and (self.last_run_at is None or at > self.last_run_at):
            self.last_run_at = at

    def merge(self, other: Agg) -> None:
        self.runs += other.runs
        self.ok_runs += other.ok_runs
        self.add_counts(other.status_counts)
        for metric, hist in other.hists.items():
            self._cdf.pop(metric, None)
            target = self.hists[metric]
            for key, n in hist.items():
                target[key] = target.get(key, 0) + n
        self.rolled_up |= other.rolled_up
        for metric, values in other.exact.items():
            self.exact.setdefault(metric, []).extend(values)
        self.seen(other.last_run_at)
        self.sum_output_tokens += other.sum_output_tokens
        self.sum_cost_usd += other.sum_cost_usd
        self.add_run_counts(other.run_counts().values())

    @property
    def success_rate(self) -> float | None:
        return self.ok_runs / self.runs if self.runs else None

    @property
    def approx_tokens_share(self) -> float | None:
        """Of the ok runs, the share whose token counts are not the provider's usage."""
        return self.approx_token_runs / self.ok_runs if self.ok_runs else None

    def counted(self, metric: str) -> int:
        """How many runs `metric`'s statistics take (contract.counts_for_metric)."""
        return sum(self.hists.get(metric, {}).values())

    @property
    def valid_share(self) -> float | None:
        """Of the checked answers (JSON, tool calls), the share that passed the check."""
        return self.valid_runs / self.checked_runs if self.checked_runs else None

    def percentile(self, metric: str, q: float) -> float | None:
        """Nearest rank: on the exact values while the metric has only raw ones, else as
        histogram.percentile on buckets (within histogram.RELATIVE_ERROR), memoised per
        metric: pages ask several percentiles of the same histogram."""
        values = self.exact.get(metric)
        if values and metric not in self.rolled_up:
            ordered = sorted(values)
            return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]
        if metric not in self._cdf:
            pairs = sorted([(int(k), n) for k, n in self.hists[metric].items()])
            self._cdf[metric] = ([k for k, _ in pairs], list(accumulate(n for _, n in pairs)))
        keys, cumulative = self._cdf[metric]
        if not keys:
            return None
        rank = max(1, math.ceil(q / 100 * cumulative[-1]))
        return histogram.bucket_value(keys[bisect_left(cumulative, rank)])

    def percentiles(self, metric: str) -> dict[int, float | None]:
        return {q: self.percentile(metric, q) for q in PERCENTILES}


GroupKey = tuple


Scope = Q


_GROUP_FIELDS = {"endpoint": "endpoint_id", "workload": "workload_id", "region": "region"}


def bucket_of(t: datetime, bucket: str) -> datetime | None:
    if bucket == "hour":
        return floor_hour(t)
    if bucket == "day":
        return floor_day(t)
    return None


def scope_of(
    endpoints: Iterable[int] | None = None, workload: Workload | None = None, region: str = ALL
) -> Q:
    q = Q()
    if endpoints is not None:
        q &= Q(endpoint_id__in=list(endpoints))
    if workload is not None:
        q &= Q(workload_id=workload.pk)
    if region and region != ALL:
        q &= Q(region=region)
    return q


def collect(
    scope: Scope,
    start: datetime,
    now: datetime,
    *,
    group_by: tuple[str, ...] = ("endpoint",),
    bucket: str = "none",
    metrics: tuple[str, ...] = ROLLUP_METRICS,
) -> dict[tuple[GroupKey, datetime | None], Agg]:
    """Aggregates per group (endpoint, workload, region) and per time bucket.

    `scope` filters by fields ProbeRun and RunRollup share (endpoint, workload, region).
    `bucket`: "none" (one bucket per group), "hour" or "day". `metrics`: the histograms
    to read (none for counters: much less data).
    """
    plan = plan_window(start, now, use_days=bucket != "hour")
    fields = tuple(_GROUP_FIELDS[g] for g in group_by)
    base = None
    if bucket == "none":
        base = snapshot_aggregates(scope, plan, fields, metrics)
    if base is None:
        base = rollup_aggregates(scope, plan, fields, bucket, metrics)
    return with_raw_tail(base, scope, plan.raw_from, now, fields, bucket, metrics)


def with_raw_tail(
    base: Mapping[tuple[GroupKey, datetime | None], Agg],
    scope: Scope,
    raw_from: datetime,
    now: datetime,
    fields: tuple[str, ...],
    bucket: str,
    metrics: tuple[str, ...],
) -> dict[tuple[GroupKey, datetime | None], Agg]:
    """`base` (rolled-up aggregates, the caller's own: they are added to) plus the raw
    runs in [raw_from, now]."""
    out = dict(base)
    n = len(fields)
    # As the rollups: a group's requests ("step") do not rank, its summary row does.
    raw = (
        ProbeRun.objects.filter(scope, started_at__gte=raw_from, started_at__lte=now)
        .exclude(role="step")
        .values_list(
            *fields,
            "started_at",
            "status",
            "short_output",
            "output_tokens",
            "cost_usd",
            "stopped_short",
            "token_source",
            "output_valid",
            "client_bound",
            *metrics,
        )
    )
    for row in raw:
        started, status, short, tokens, cost, stopped_short, source, valid, bound = row[n : n + 9]
        key = (tuple(row[:n]), bucket_of(started, bucket))
        agg = out.get(key) or out.setdefault(key, Agg())
        agg.runs += 1
        agg.status_counts[status] = agg.status_counts.get(status, 0) + 1
        agg.seen(started)
        agg.sum_output_tokens += tokens or 0
        agg.sum_cost_usd += cost or 0
        if status != "ok":
            continue  # failed runs count for availability, never for latency or speed
        agg.ok_runs += 1
        agg.approx_token_runs += approx_tokens(source)
        agg.client_bound_runs += bool(bound)
        if answer_checked(status, valid):
            agg.checked_runs += 1
            agg.valid_runs += valid
        for metric, value in zip(metrics, row[n + 9 :], strict=True):
            if counts_for_metric(
                metric, client_bound=bound, short_output=short, stopped_short=stopped_short
            ):
                agg.add_value(metric, value)
    return out


# Rollup reads, memoised per process for a minute. Rollups before the raw tail change
# only when a late run lands in an old hour (recomputed by the scheduler within a minute
# or so), and the plan's ranges move on every hour, so a minute-old read is as fresh as
# the rollups themselves, while reading and decoding thousands of rows is most of the
# cost of a long window.
MEMO_SECONDS = 60.0


_MEMO: OrderedDict = OrderedDict()


_MEMO_SIZE = 64


_MEMO_LOCK = threading.Lock()


_clock = time.monotonic


def clear_memo() -> None:
    with _MEMO_LOCK:
        _MEMO.clear()


def memoised(key: tuple, compute: Callable[[], T], copy: Callable[[T], T]) -> T:
    """`compute()`, kept for MEMO_SECONDS under `key`. The memo never hands out what it
    holds: every caller gets `copy(value)`, its own to change."""
    now = _clock()
    with _MEMO_LOCK:
        if key in _MEMO and _MEMO[key][0] > now:
            _MEMO.move_to_end(key)
            return copy(_MEMO[key][1])
    value = compute()
    with _MEMO_LOCK:
        _MEMO[key] = (now + MEMO_SECONDS, value)
        _MEMO.move_to_end(key)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return copy(value)


def copy_aggregates(aggs: Mapping[K, Agg]) -> dict[K, Agg]:
    return {key: agg.copy() for key, agg in aggs.items()}


def rollup_aggregates(
    scope: Scope,
    plan: Plan,
    fields: tuple[str, ...],
    bucket: str,
    metrics: tuple[str, ...],
) -> dict[tuple[GroupKey, datetime | None], Agg]:
    """The rollup part of a plan, merged per group and bucket (memoised; a copy)."""
    if not plan.rollups:
        return {}
    ranges = Q()
    for granularity, lo, hi in plan.rollups:
        ranges |= Q(granularity=granularity, bucket_start__gte=lo, bucket_start__lt=hi)
    return memoised(
        ("aggregates", str(scope), tuple(plan.rollups), fields, bucket, metrics),
        lambda: read_rollups(
            RunRollup.objects.filter(scope).filter(ranges), fields, bucket, metrics
        ),
        copy_aggregates,
    )


def read_rollups(rows, fields, bucket, metrics) -> dict[tuple[GroupKey, datetime | None], Agg]:
    # JSON columns come as text and are decoded with orjson: Django's JSONField decoding
    # (stdlib json, per value) was most of the cost of a long window.
    text = {"_status_counts": Cast("status_counts", TextField())}
    text.update({f"_{m}": Cast(f"hist_{m}", TextField()) for m in metrics})
    values = rows.annotate(**text).values_list(
        *fields,
        "bucket_start",
        "runs",
        "ok_runs",
        "last_run_at",
        "sum_output_tokens",
        "sum_cost_usd",
        *RUN_COUNTS,
        "_status_counts",
        *(f"_{m}" for m in metrics),
    )
    n = len(fields)
    status_at = n + 6 + len(RUN_COUNTS)  # the status counts' column
    out: dict[tuple[GroupKey, datetime | None], Agg] = defaultdict(Agg)
    for row in values:
        start_at, runs, ok_runs, last, tokens, cost = row[n : n + 6]
        run_counts, counts = row[n + 6 : status_at], row[status_at]
        agg = out[(tuple(row[:n]), bucket_of(start_at, bucket))]
        agg.runs += runs
        agg.ok_runs += ok_runs
        agg.seen(last)
        agg.sum_output_tokens += tokens or 0
        agg.sum_cost_usd += cost or 0
        agg.add_run_counts(run_counts)
        if counts:
            agg.add_counts(orjson.loads(counts))
        for metric, hist in zip(metrics, row[status_at + 1 :], strict=True):
            if hist and hist != "{}":
                agg.add_hist(metric, orjson.loads(hist))
    return dict(out)


def snapshot_window(plan: Plan) -> str | None:
    """The window whose snapshot (dashboard/snapshots.py) covers exactly the rolled-up
    part of `plan`, if one was built for it this hour and not invalidated since."""
    if not plan.rollups:
        return None
    return (
        SnapshotBuild.objects.filter(
            window__in=list(LEADERBOARD_WINDOWS),
            covers_from=plan.rollups[0][1],
            covers_to=plan.raw_from,
        )
        .values_list("window", flat=True)
        .first()
    )


def snapshot_aggregates(
    scope: Scope, plan: Plan, fields: tuple[str, ...], metrics: tuple[str, ...]
) -> dict[tuple[GroupKey, None], Agg] | None:
    """The rolled-up part of `plan` from a window snapshot: one row per series instead of
    dozens of rollup rows. None when no snapshot covers the plan (read rollups instead)."""
    window = snapshot_window(plan)
    if window is None:
        return None
    rows = (
        WindowSnapshot.objects.filter(scope, window=window)
        .exclude(region=WindowSnapshot.ALL_REGIONS)
        .annotate(_counts=Cast("status_counts", TextField()), _hists=Cast("hists", TextField()))
        .values_list(
            *fields,
            "runs",
            "ok_runs",
            "last_run_at",
            "sum_output_tokens",
            "sum_cost_usd",
            *RUN_COUNTS,
            "_counts",
            "_hists",
        )
    )
    n = len(fields)
    out: dict[tuple[GroupKey, None], Agg] = defaultdict(Agg)
    for row in rows:
        runs, ok_runs, last, tokens, cost = row[n : n + 5]
        *run_counts, counts, hists = row[n + 5 :]
        agg = out[(tuple(row[:n]), None)]
        agg.runs += runs
        agg.ok_runs += ok_runs
        agg.seen(last)
        agg.sum_output_tokens += tokens
        agg.sum_cost_usd += cost
        agg.add_run_counts(run_counts)
        agg.add_counts(orjson.loads(counts))
        decoded = orjson.loads(hists)
        for metric in metrics:
            agg.add_hist(metric, decoded.get(metric, {}))
    return dict(out)


Series = tuple[int, int, str]  # endpoint_id, workload_id, region


def lifetime_plan(now: datetime) -> Plan:
    """All of time: every rollup from the oldest one, then the raw tail."""
    firsts = [
        RunRollup.objects.filter(granularity=granularity)  # served by rollup_window_idx
        .order_by("bucket_start")
        .values_list("bucket_start", flat=True)
        .first()
        for granularity in (RunRollup.HOUR, RunRollup.DAY)
    ]
    return plan_window(min((f for f in firsts if f), default=now - RAW_TAIL), now)
