"""The read side: leaderboards, history series and breakdowns, from rollups and raw runs.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import accumulate

import orjson
from django.conf import settings
from django.db import connection
from django.db.models import Case, Count, Q, TextField, Value, When
from django.db.models.functions import Cast
from django.utils import timezone

from dashboard import histogram
from dashboard.models import ROLLUP_METRICS, RunRollup, SnapshotBuild, WindowSnapshot
from dashboard.web.definitions import METRICS, PERCENTILES
from probes.models import (
    STATUSES,
    CanonicalModel,
    Claim,
    Endpoint,
    Price,
    Probe,
    ProbeRun,
    Workload,
)
from probes.workloads import DEFAULT_SLUG, canonical_slug

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)

LEADERBOARD_WINDOWS: dict[str, timedelta] = {
    "1h": HOUR,
    "24h": 24 * HOUR,
    "72h": 72 * HOUR,
    "7d": 7 * DAY,
    "30d": 30 * DAY,
}
HISTORY_WINDOWS: dict[str, timedelta] = {**LEADERBOARD_WINDOWS, "90d": 90 * DAY}
DEFAULT_WINDOW = "72h"
# The snapshot of all of time (/metrics counters), beside the leaderboard windows'.
LIFETIME = "lifetime"
DEFAULT_HISTORY_WINDOW = "7d"
ALL = "all"

# Rollups of the last RAW_TAIL hours may still be filling in, so those hours come from
# raw runs; older hours come from rollups.
RAW_TAIL = HOUR

SORT_KEYS = (
    "output_tps",
    "ttft_ms",
    "ttfat_ms",
    "e2e_ms",
    "blended_price",
    "success_rate",
    "samples",
    "last_run",
    "provider",
    "model",
)
STATUS_NAMES = tuple(name for name, _ in STATUSES)


class BadFilter(ValueError):
    """A filter value we do not know; the message says which values are accepted."""


# --------------------------------------------------------------------------- filters


@dataclass(frozen=True)
class Filters:
    model: str = ALL
    workload: str = ""
    window: str = DEFAULT_WINDOW
    region: str = ALL
    sort: str = "-output_tps"

    @property
    def sort_key(self) -> str:
        return self.sort.lstrip("-")

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")

    def as_params(self, **changes: str) -> dict[str, str]:
        values = {
            "model": self.model,
            "workload": self.workload,
            "window": self.window,
            "region": self.region,
            "sort": self.sort,
        }
        values.update(changes)
        return values

    def sort_param_for(self, key: str) -> str:
        """The sort value a header link sets: flips direction when already sorted by it."""
        if self.sort_key == key:
            return key if self.descending else f"-{key}"
        metric = METRICS.get(key)
        return f"-{key}" if metric and metric.better == "higher" else key


def one_of(name: str, value: str, allowed: Iterable[str]) -> str:
    allowed = list(allowed)
    if value not in allowed:
        shown = ", ".join(allowed) if allowed else "(none configured yet)"
        raise BadFilter(f"Unknown {name} {value!r}. Use one of: {shown}.")
    return value


def workload_param(value: str) -> str:
    """A workload slug from a URL; old slugs (chat-1k, short) name their successors."""
    slugs = list(Workload.objects.values_list("slug", flat=True))
    return one_of("workload", value if value in slugs else canonical_slug(value), slugs)


def regions() -> list[str]:
    """Regions probes run from. Read from Probe, not from runs or rollups: a DISTINCT
    over millions of rows on every page view would cost more than the page."""
    return list(Probe.objects.values_list("region", flat=True).distinct().order_by("region"))


def default_workload() -> str:
    """The home page's workload: settings.DEFAULT_WORKLOAD (standard-1k out of the box;
    an old slug such as chat-1k names its successor).

    A setting, not "what most probes run": adding a few probes of another workload must
    not switch the board to it. Only when that workload does not exist here does the
    one most probes run stand in (the headline workload winning ties).
    """
    setting = settings.DEFAULT_WORKLOAD
    for wanted in dict.fromkeys([setting, canonical_slug(setting)]):
        if Workload.objects.filter(slug=wanted).exists():
            return wanted
    headline = Case(When(slug=DEFAULT_SLUG, then=Value(0)), default=Value(1))
    slug = (
        Workload.objects.annotate(n=Count("probes"), headline=headline)
        .order_by("-n", "headline", "slug")
        .values_list("slug", flat=True)
        .first()
    )
    return slug or ""


def parse_filters(params: Mapping[str, str], windows: Mapping[str, timedelta] | None = None):
    """Validated leaderboard filters from query parameters; BadFilter on unknown values."""
    windows = windows or LEADERBOARD_WINDOWS
    model = params.get("model") or ALL
    if model != ALL:
        one_of("model", model, [ALL, *CanonicalModel.objects.values_list("slug", flat=True)])
    workload = params.get("workload") or default_workload()
    if workload:
        workload = workload_param(workload)
    window = one_of("window", params.get("window") or DEFAULT_WINDOW, windows)
    region = params.get("region") or ALL
    if region != ALL:
        one_of("region", region, [ALL, *regions()])
    sort = params.get("sort") or "-output_tps"
    one_of("sort", sort.lstrip("-"), SORT_KEYS)
    return Filters(model=model, workload=workload, window=window, region=region, sort=sort)


@dataclass(frozen=True)
class HistoryFilters:
    window: str = DEFAULT_HISTORY_WINDOW
    workload: Workload | None = None
    region: str = ALL

    def as_params(self) -> dict[str, str]:
        return {
            "window": self.window,
            "workload": self.workload.slug if self.workload else ALL,
            "region": self.region,
        }


def parse_history_filters(params: Mapping[str, str]) -> HistoryFilters:
    """Window (up to 90 days), workload and region; BadFilter on unknown values.

    No workload parameter means the leaderboard's default workload, so a page reached
    from the board shows the same series; `workload=all` pools them all.
    """
    window = one_of("window", params.get("window") or DEFAULT_HISTORY_WINDOW, HISTORY_WINDOWS)
    slug = params.get("workload") or (ALL if "workload" in params else default_workload())
    workload = None
    if slug and slug != ALL:
        workload = Workload.objects.get(slug=workload_param(slug))
    region = params.get("region") or ALL
    if region != ALL:
        one_of("region", region, [ALL, *regions()])
    return HistoryFilters(window=window, workload=workload, region=region)


# ------------------------------------------------------------------ time planning


def floor_hour(t: datetime) -> datetime:
    return t.replace(minute=0, second=0, microsecond=0)


def floor_day(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


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


# ------------------------------------------------------------------ aggregation


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
            exact={m: list(v) for m, v in self.exact.items()},
            rolled_up=set(self.rolled_up),
        )

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

    @property
    def success_rate(self) -> float | None:
        return self.ok_runs / self.runs if self.runs else None

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
_RAW_METRIC_FIELDS = ("ttft_ms", "ttfat_ms", "output_tps", "e2e_ms")


def _bucket_of(t: datetime, bucket: str) -> datetime | None:
    if bucket == "hour":
        return floor_hour(t)
    if bucket == "day":
        return floor_day(t)
    return None


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
        base = _snapshot_aggregates(scope, plan, fields, metrics)
    if base is None:
        base = _rollup_aggregates(scope, plan, fields, bucket, metrics)
    return _with_raw_tail(base, scope, plan.raw_from, now, fields, bucket, metrics)


def _with_raw_tail(
    base: Mapping[tuple[GroupKey, datetime | None], Agg],
    scope: Scope,
    raw_from: datetime,
    now: datetime,
    fields: tuple[str, ...],
    bucket: str,
    metrics: tuple[str, ...],
) -> dict[tuple[GroupKey, datetime | None], Agg]:
    """`base` (rolled-up aggregates) plus the raw runs in [raw_from, now]."""
    # Aggregates from the memo are shared: copy one before the first change to it.
    out = dict(base)
    owned: set = set()

    def mine(key) -> Agg:
        if key not in owned:
            out[key] = out[key].copy() if key in out else Agg()
            owned.add(key)
        return out[key]

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
            *metrics,
        )
    )
    for row in raw:
        started, status, short, tokens, cost, stopped_short = row[n : n + 6]
        short = short or stopped_short  # neither ranks on speed
        agg = mine((tuple(row[:n]), _bucket_of(started, bucket)))
        agg.runs += 1
        agg.status_counts[status] = agg.status_counts.get(status, 0) + 1
        agg.seen(started)
        agg.sum_output_tokens += tokens or 0
        agg.sum_cost_usd += cost or 0
        if status != "ok":
            continue  # failed runs count for availability, never for latency or speed
        agg.ok_runs += 1
        for metric, value in zip(metrics, row[n + 6 :], strict=True):
            if metric == "output_tps" and short:
                continue  # too short to rank on speed (metrics.md)
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


def _rollup_aggregates(
    scope: Scope,
    plan: Plan,
    fields: tuple[str, ...],
    bucket: str,
    metrics: tuple[str, ...],
) -> dict[tuple[GroupKey, datetime | None], Agg]:
    """The rollup part of a plan, merged per group and bucket (memoised, never modify)."""
    if not plan.rollups:
        return {}
    ranges = Q()
    for granularity, lo, hi in plan.rollups:
        ranges |= Q(granularity=granularity, bucket_start__gte=lo, bucket_start__lt=hi)
    return _memoised(
        ("aggregates", str(scope), tuple(plan.rollups), fields, bucket, metrics),
        lambda: _read_rollups(
            RunRollup.objects.filter(scope).filter(ranges), fields, bucket, metrics
        ),
    )


def _memoised(key: tuple, compute):
    now = _clock()
    with _MEMO_LOCK:
        if key in _MEMO and _MEMO[key][0] > now:
            _MEMO.move_to_end(key)
            return _MEMO[key][1]
    value = compute()
    with _MEMO_LOCK:
        _MEMO[key] = (now + MEMO_SECONDS, value)
        _MEMO.move_to_end(key)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return value


def _read_rollups(rows, fields, bucket, metrics) -> dict[tuple[GroupKey, datetime | None], Agg]:
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
        "_status_counts",
        *(f"_{m}" for m in metrics),
    )
    n = len(fields)
    out: dict[tuple[GroupKey, datetime | None], Agg] = defaultdict(Agg)
    for row in values:
        start_at, runs, ok_runs, last, tokens, cost, counts = row[n : n + 7]
        agg = out[(tuple(row[:n]), _bucket_of(start_at, bucket))]
        agg.runs += runs
        agg.ok_runs += ok_runs
        agg.seen(last)
        agg.sum_output_tokens += tokens or 0
        agg.sum_cost_usd += cost or 0
        if counts:
            agg.add_counts(orjson.loads(counts))
        for metric, hist in zip(metrics, row[n + 7 :], strict=True):
            if hist and hist != "{}":
                agg.add_hist(metric, orjson.loads(hist))
    return dict(out)


# ------------------------------------------------------------------ snapshots


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


def _snapshot_aggregates(
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
            "_counts",
            "_hists",
        )
    )
    n = len(fields)
    out: dict[tuple[GroupKey, None], Agg] = defaultdict(Agg)
    for row in rows:
        runs, ok_runs, last, tokens, cost, counts, hists = row[n:]
        agg = out[(tuple(row[:n]), None)]
        agg.runs += runs
        agg.ok_runs += ok_runs
        agg.seen(last)
        agg.sum_output_tokens += tokens
        agg.sum_cost_usd += cost
        agg.add_counts(orjson.loads(counts))
        decoded = orjson.loads(hists)
        for metric in metrics:
            agg.add_hist(metric, decoded.get(metric, {}))
    return dict(out)


def sparkline_bucket(window: str) -> str:
    """Even buckets so sparklines read evenly: hours up to three days, days beyond."""
    return "hour" if LEADERBOARD_WINDOWS[window] <= 72 * HOUR else "day"


@dataclass
class WindowFigures:
    """A leaderboard window's figures per endpoint and its per-bucket speed sparklines."""

    totals: dict[int, Agg]
    sparklines: dict[int, list[Point]]


def window_figures(window: str, scope: Scope, region: str, now: datetime) -> WindowFigures:
    """Figures and sparklines per endpoint, grouped over regions unless one is chosen.

    The rolled-up part comes from the window's snapshot when one matches (one row per
    series), else from rollups; the raw tail is read once, per sparkline bucket, and
    serves both the totals and the sparklines.
    """
    start = now - LEADERBOARD_WINDOWS[window]
    bucket = sparkline_bucket(window)
    fields = ("endpoint_id",)
    plan = plan_window(start, now)
    tail = _with_raw_tail({}, scope, plan.raw_from, now, fields, bucket, ROLLUP_METRICS)

    base = _snapshot_aggregates(scope, plan, fields, ROLLUP_METRICS)
    shared = base is None  # memoised rollup reads are shared: copied before changing
    if base is None:
        base = _rollup_aggregates(scope, plan, fields, "none", ROLLUP_METRICS)
        spark_plan = plan_window(start, now, use_days=bucket != "hour")
        spark_base = _rollup_aggregates(scope, spark_plan, fields, bucket, ("output_tps",))
        finished: dict[int, list[Point]] = {}
    else:
        finished, spark_base = _snapshot_sparklines(scope, plan, region)

    totals = {key[0]: agg.copy() if shared else agg for (key, _), agg in base.items()}
    buckets = {key: agg.copy() if shared else agg for key, agg in spark_base.items()}
    for key, agg in tail.items():
        (endpoint_id,), _ = key
        totals.setdefault(endpoint_id, Agg()).merge(agg)
        buckets.setdefault(key, Agg()).merge(agg)
    spark = {endpoint_id: list(points) for endpoint_id, points in finished.items()}
    for ((endpoint_id,), when), agg in sorted(buckets.items(), key=lambda kv: kv[0][1]):
        spark.setdefault(endpoint_id, []).append(Point(when, agg.percentile("output_tps", 50)))
    return WindowFigures(totals, spark)


def _snapshot_sparklines(
    scope: Scope, plan: Plan, region: str
) -> tuple[dict[int, list[Point]], dict[tuple[GroupKey, datetime | None], Agg]]:
    """Sparkline points of finished buckets, and the speed histogram of the bucket still
    filling (today, for daily points) to merge with the raw tail, from the snapshot."""
    window = snapshot_window(plan)
    rows = WindowSnapshot.objects.filter(
        scope & Q(region=WindowSnapshot.ALL_REGIONS) if region == ALL else scope,
        window=window,
    ).values_list("endpoint_id", "spark_points", "spark_open")
    finished: dict[int, list[Point]] = {}
    open_buckets: dict[tuple[GroupKey, datetime | None], Agg] = {}
    for endpoint_id, points, open_bucket in rows:
        finished[endpoint_id] = [Point(_from_epoch(t), value) for t, value in points]
        if open_bucket:
            agg = Agg()
            agg.add_hist("output_tps", open_bucket[1])
            open_buckets[((endpoint_id,), _from_epoch(open_bucket[0]))] = agg
    return finished, open_buckets


def _from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _scope(
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


# ------------------------------------------------------------------ leaderboard


@dataclass
class ClaimVsMeasured:
    metric: str
    claim: Claim
    measured: float | None

    @property
    def reference(self) -> float:
        """The end of a claimed range most favourable to the vendor."""
        if self.claim.value_high is None:
            return self.claim.value
        return self.claim.value_high if self.metric == "output_tps" else self.claim.value

    @property
    def share(self) -> float | None:
        """Measured as a fraction of claimed."""
        if self.measured is None or not self.reference:
            return None
        return self.measured / self.reference

    def __str__(self) -> str:
        measured = "—" if self.measured is None else f"{self.measured:,.0f}"
        share = "" if self.share is None else f" · {self.share:.0%}".replace("%", " %")
        return f"claimed {self.claim.display_value} · measured {measured}{share}"


@dataclass
class Point:
    t: datetime
    value: float | None


@dataclass
class Row:
    endpoint: Endpoint
    agg: Agg
    blended_price: Decimal | None
    claims: list[ClaimVsMeasured]
    sparkline: list[Point]
    # The workload cannot fit the endpoint's context: shown greyed, never measured.
    not_applicable: bool = False

    @property
    def provider(self):
        return self.endpoint.provider

    @property
    def model(self):
        return self.endpoint.canonical_model

    @property
    def samples(self) -> int:
        return self.agg.runs

    @property
    def success_rate(self) -> float | None:
        return self.agg.success_rate

    @property
    def last_run(self) -> datetime | None:
        return self.agg.last_run_at

    def p(self, metric: str, q: int = 50) -> float | None:
        return self.agg.percentile(metric, q)

    @property
    def output_tps(self) -> float | None:
        return self.p("output_tps")

    @property
    def ttft_ms(self) -> float | None:
        return self.p("ttft_ms")

    @property
    def ttfat_ms(self) -> float | None:
        return self.p("ttfat_ms")

    @property
    def e2e_ms(self) -> float | None:
        return self.p("e2e_ms")

    def sort_value(self, key: str):
        if key == "provider":
            return self.endpoint.provider.name.lower()
        if key == "model":
            return self.endpoint.canonical_model.name.lower()
        return getattr(self, key)

    def as_dict(self) -> dict:
        """The API shape: metric names from metrics.md with percentile suffixes."""
        e = self.endpoint
        data: dict = {
            "endpoint_id": e.pk,
            "provider": e.provider.slug,
            "provider_name": e.provider.name,
            "simulated": e.provider.simulated,
            "model": e.canonical_model.slug,
            "model_name": e.canonical_model.name,
            "model_id": e.model_id,
            "not_applicable": self.not_applicable,
        }
        for metric in ROLLUP_METRICS:
            for q, value in self.agg.percentiles(metric).items():
                data[f"{metric}_p{q}"] = _round(value)
        data["blended_price_per_m"] = (
            None if self.blended_price is None else float(round(self.blended_price, 4))
        )
        data["success_rate"] = _round(self.success_rate, 4)
        data["samples"] = self.samples
        data["ok_samples"] = self.agg.ok_runs
        data["last_run_at"] = self.last_run.isoformat() if self.last_run else None
        for c in self.claims:
            data[f"claimed_{c.metric}"] = c.claim.value
            data[f"claimed_{c.metric}_high"] = c.claim.value_high
        return data


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def current_prices(endpoint_ids: Iterable[int], today=None) -> dict[int, Price]:
    """The price in force today per endpoint, in one query."""
    today = today or timezone.now().date()
    prices = (
        Price.objects.filter(endpoint_id__in=list(endpoint_ids), effective_from__lte=today)
        .order_by("endpoint_id", "-effective_from")
        .distinct("endpoint_id")
    )
    return {p.endpoint_id: p for p in prices}


def claims_for(
    endpoints: list[Endpoint], workload: Workload | None = None
) -> dict[int, list[Claim]]:
    """Claims covering each endpoint: named for it, or for its provider and model; a
    claim about a use case only when its workload is the one shown."""
    if not endpoints:
        return {}
    # A superset in one simple query (an OR per endpoint makes a slow query to build),
    # narrowed by Claim.covers.
    candidates = list(
        Claim.objects.filter(
            Q(endpoint_id__in=[e.pk for e in endpoints])
            | Q(
                endpoint=None,
                provider_id__in={e.provider_id for e in endpoints},
                canonical_model_id__in={e.canonical_model_id for e in endpoints},
            )
        )
    )
    workload_id = workload.pk if workload is not None else None
    return {e.pk: [c for c in candidates if c.covers(e, workload_id)] for e in endpoints}


def best_claims(claims: list[Claim], agg: Agg) -> list[ClaimVsMeasured]:
    """One claim per metric beside our median: the most specific (about the workload,
    then about the endpoint), then the newest (published_on, then id)."""
    chosen: dict[str, Claim] = {}

    def rank(c: Claim) -> tuple:
        return (c.workload_id is not None, c.endpoint_id is not None, c.published_on or 0, c.pk)

    for c in sorted(claims, key=rank):
        chosen[c.metric] = c
    return [
        ClaimVsMeasured(metric, claim, agg.percentile(metric, 50))
        for metric, claim in sorted(chosen.items())
    ]


@dataclass
class Leaderboard:
    filters: Filters
    rows: list[Row]
    start: datetime
    now: datetime
    workload: Workload | None

    @property
    def has_data(self) -> bool:
        return any(r.samples for r in self.rows)


def leaderboard(filters: Filters, now: datetime | None = None) -> Leaderboard:
    now = now or timezone.now()
    start = now - LEADERBOARD_WINDOWS[filters.window]
    workload = Workload.objects.filter(slug=filters.workload).first() if filters.workload else None
    if workload is None:
        return Leaderboard(filters, [], start, now, None)
    model_endpoints = None
    if filters.model != ALL:
        model_endpoints = list(
            Endpoint.objects.filter(canonical_model__slug=filters.model).values_list(
                "pk", flat=True
            )
        )

    scope = _scope(model_endpoints, workload, filters.region)
    figures = window_figures(filters.window, scope, filters.region, now)

    # The board is what is probed now: endpoints with an active probe for this workload,
    # silent ones included (an empty row says "probed, no data", which is news in
    # itself). A series whose probe was disabled or deleted leaves the board: its
    # history stays on the endpoint and model pages. Catalog endpoints of providers
    # without a key (disabled) are left out too.
    probed = Probe.objects.active().filter(workload=workload)
    # Endpoints whose context cannot hold the workload: one greyed "not applicable" row.
    too_small = Endpoint.objects.filter(enabled=True, provider__enabled=True).too_small_for(
        workload
    )
    if model_endpoints is not None:
        probed = probed.filter(endpoint_id__in=model_endpoints)
        too_small = too_small.filter(pk__in=model_endpoints)
    if filters.region != ALL:
        probed = probed.filter(region=filters.region)
    not_applicable = set(too_small.values_list("pk", flat=True))
    shown_ids = set(probed.values_list("endpoint_id", flat=True)) | not_applicable
    # Only the endpoints shown: a catalog may hold many more than one workload probes.
    shown = list(
        Endpoint.objects.select_related("provider", "canonical_model").filter(pk__in=shown_ids)
    )
    prices = current_prices(shown_ids, now.date())
    claims = claims_for(shown, workload)
    rows = []
    for e in shown:
        if e.pk in not_applicable:
            continue
        agg = figures.totals.get(e.pk, Agg())
        rows.append(
            Row(
                endpoint=e,
                agg=agg,
                blended_price=prices[e.pk].blended_per_m if e.pk in prices else None,
                claims=best_claims(claims.get(e.pk, []), agg),
                sparkline=figures.sparklines.get(e.pk, []),
            )
        )
    rows = sort_rows(rows, filters.sort_key, filters.descending)
    greyed = [
        Row(e, Agg(), None, [], [], not_applicable=True) for e in shown if e.pk in not_applicable
    ]
    rows += sorted(greyed, key=lambda r: r.sort_value("provider"))
    return Leaderboard(filters, rows, start, now, workload)


def sort_rows(rows: list[Row], key: str, descending: bool) -> list[Row]:
    """Sorted by `key`; rows without a value always last, whatever the direction."""
    with_value = [r for r in rows if r.sort_value(key) is not None]
    without = [r for r in rows if r.sort_value(key) is None]
    with_value.sort(key=lambda r: r.sort_value(key), reverse=descending)
    without.sort(key=lambda r: r.sort_value("provider"))
    return with_value + without


# ------------------------------------------------------------------ history


@dataclass
class SeriesPoint:
    t: datetime
    p25: float | None
    p50: float | None
    p75: float | None
    samples: int


@dataclass
class EndpointHistory:
    endpoint: Endpoint
    series: dict[str, list[SeriesPoint]]  # metric → points
    availability: list[tuple[datetime, float | None, int]]  # (t, success rate, runs)
    totals: Agg


def history_bucket(window: str) -> str:
    """Hourly points up to a week, daily beyond: a few hundred points at most."""
    return "hour" if HISTORY_WINDOWS[window] <= 7 * DAY else "day"


def history(
    endpoints: list[Endpoint],
    *,
    window: str = DEFAULT_HISTORY_WINDOW,
    workload: Workload | None = None,
    region: str = ALL,
    metrics: Iterable[str] = ROLLUP_METRICS,
    now: datetime | None = None,
) -> list[EndpointHistory]:
    """Per endpoint: p25/p50/p75 per time bucket for each metric, and availability."""
    now = now or timezone.now()
    start = now - HISTORY_WINDOWS[window]
    bucket = history_bucket(window)
    scope = _scope([e.pk for e in endpoints], workload, region)
    data = collect(scope, start, now, group_by=("endpoint",), bucket=bucket)
    by_endpoint: dict[int, list[tuple[datetime, Agg]]] = defaultdict(list)
    for ((endpoint_id,), when), agg in data.items():
        by_endpoint[endpoint_id].append((when, agg))
    metrics = list(metrics)
    out = []
    for e in endpoints:
        points = sorted(by_endpoint.get(e.pk, []), key=lambda p: p[0])
        totals = Agg()
        for _, agg in points:
            totals.merge(agg)
        series = {
            m: [
                SeriesPoint(
                    t,
                    agg.percentile(m, 25),
                    agg.percentile(m, 50),
                    agg.percentile(m, 75),
                    histogram.count(agg.hists[m]),
                )
                for t, agg in points
                if agg.hists[m]
            ]
            for m in metrics
        }
        availability = [(t, agg.success_rate, agg.runs) for t, agg in points]
        out.append(EndpointHistory(e, series, availability, totals))
    return out


def status_breakdown(agg: Agg) -> list[tuple[str, int, float]]:
    """(status, runs, share) from most to least frequent."""
    total = sum(agg.status_counts.values()) or 1
    return sorted(
        ((s, n, n / total) for s, n in agg.status_counts.items() if n),
        key=lambda x: (-x[1], x[0]),
    )


# ------------------------------------------------------------------ /metrics


Series = tuple[int, int, str]  # endpoint_id, workload_id, region

_LIFETIME_SQL = """
SELECT r.endpoint_id, r.workload_id, r.region, kv.key, sum(kv.value::bigint)
  FROM dashboard_runrollup r CROSS JOIN LATERAL jsonb_each_text(r.status_counts) AS kv
 WHERE r.granularity = %s AND r.bucket_start >= %s AND r.bucket_start < %s
 GROUP BY 1, 2, 3, 4
"""


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


def lifetime_counts_from_rollups(plan: Plan) -> dict[Series, dict[str, int]]:
    """Runs by status per series over the rolled-up part of `plan`, summed in Postgres
    (a year of daily rows is too much to ship to Python)."""
    totals: dict[Series, dict[str, int]] = defaultdict(dict)
    with connection.cursor() as cursor:
        for granularity, lo, hi in plan.rollups:
            cursor.execute(_LIFETIME_SQL, [granularity, lo, hi])
            for endpoint_id, workload_id, region, status, n in cursor.fetchall():
                counts = totals[(endpoint_id, workload_id, region)]
                counts[status] = counts.get(status, 0) + int(n)
    return dict(totals)


def lifetime_status_counts(now: datetime | None = None) -> dict[Series, dict[str, int]]:
    """Runs ever recorded by status, per endpoint × workload × region (/metrics counters).

    Read from rollups, which outlive raw-run retention, so counters never go down: from
    the lifetime snapshot (one row per series, dashboard/snapshots.py) while it matches,
    else summed from every rollup row.
    """
    now = now or timezone.now()
    plan = lifetime_plan(now)
    totals = None
    if (
        plan.rollups
        and SnapshotBuild.objects.filter(
            window=LIFETIME, covers_from=plan.rollups[0][1], covers_to=plan.raw_from
        ).exists()
    ):
        rows = WindowSnapshot.objects.filter(window=LIFETIME).values_list(
            "endpoint_id", "workload_id", "region", "status_counts"
        )
        totals = {(e, w, r): dict(counts) for e, w, r, counts in rows}
    if totals is None:
        memo = _memoised(
            ("lifetime", tuple(plan.rollups)), lambda: lifetime_counts_from_rollups(plan)
        )
        totals = {series: dict(counts) for series, counts in memo.items()}
    recent = (
        ProbeRun.objects.filter(started_at__gte=plan.raw_from, started_at__lte=now)
        .exclude(role="step")
        .values_list("endpoint_id", "workload_id", "region", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for endpoint_id, workload_id, region, status, n in recent:
        counts = totals.setdefault((endpoint_id, workload_id, region), {})
        counts[status] = counts.get(status, 0) + n
    return totals


def lost_slots_by_region(since: datetime) -> list[tuple[str, int]]:
    """(region, lost slots) since `since`, for regions that lost any."""
    from probes import ledger

    lost = ledger.lost_since(since).values("region").annotate(n=Count("pk"))
    return sorted((row["region"], row["n"]) for row in lost)


def probe_lag_seconds(now: datetime | None = None) -> list[tuple[Probe, float]]:
    """How far behind schedule each active probe is (0 when on time)."""
    now = now or timezone.now()
    probes = Probe.objects.active().select_related(
        "endpoint__provider", "endpoint__canonical_model", "workload"
    )
    return [(p, max(0.0, (now - p.next_run_at).total_seconds())) for p in probes]
