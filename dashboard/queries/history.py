"""History: per endpoint, percentiles per hour or day for each metric, and availability."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from dashboard import histogram
from dashboard.definitions import runs_by_cause
from dashboard.models import ROLLUP_METRICS
from dashboard.queries import resolution
from dashboard.queries.aggregates import (
    ALL,
    DEFAULT_HISTORY_WINDOW,
    HISTORY_WINDOWS,
    Agg,
    collect,
    scope_of,
)
from probes.engine.contract import counts_for_metric
from probes.models import Endpoint, Probe, ProbeRun, Workload


@dataclass
class SeriesPoint:
    t: datetime
    p25: float | None
    p50: float | None
    p75: float | None
    samples: int
    p95: float | None = None


@dataclass
class EndpointHistory:
    endpoint: Endpoint
    series: dict[str, list[SeriesPoint]]  # metric → points
    availability: list[tuple[datetime, float | None, int]]  # (t, success rate, runs)
    totals: Agg
    # Runs by cause per bucket, keyed by the bucket's start: a bar covers its bucket.
    causes: list[tuple[datetime, dict[str, int]]] = field(default_factory=list)
    resolution: str = resolution.RUN  # "run", "hour" or "day" (queries/resolution.py)
    causes_bucket: str = "hour"  # the causes' buckets: "hour" or "day"
    first_run: datetime | None = None  # the series' first run in the window


def run_points(
    scope, start: datetime, now: datetime, metrics: list[str]
) -> dict[int, dict[str, list[SeriesPoint]]]:
    """Per endpoint and metric, one point per ok run (a group's summary row, never its
    requests, as the rollups count them); speeds only from runs long enough to rank."""
    rows = (
        ProbeRun.objects.filter(scope, started_at__gte=start, started_at__lte=now, status="ok")
        .exclude(role="step")
        .order_by("started_at", "id")
        .values_list(
            "endpoint_id", "started_at", "client_bound", "short_output", "stopped_short", *metrics
        )
    )
    out: dict[int, dict[str, list[SeriesPoint]]] = defaultdict(lambda: defaultdict(list))
    for endpoint_id, started, bound, short, stopped_short, *values in rows:
        for metric, v in zip(metrics, values, strict=True):
            if v is None or not counts_for_metric(
                metric, client_bound=bound, short_output=short, stopped_short=stopped_short
            ):
                continue
            out[endpoint_id][metric].append(SeriesPoint(started, v, v, v, 1, v))
    return out


def history(
    endpoints: list[Endpoint],
    *,
    window: str = DEFAULT_HISTORY_WINDOW,
    workload: Workload | None = None,
    region: str = ALL,
    metrics: Iterable[str] = ROLLUP_METRICS,
    now: datetime | None = None,
) -> list[EndpointHistory]:
    """Per endpoint: p25/p50/p75 per point for each metric, and availability, over the
    named window."""
    now = now or timezone.now()
    return history_between(
        endpoints,
        now - HISTORY_WINDOWS[window],
        now,
        workload=workload,
        region=region,
        metrics=metrics,
    )


def history_between(
    endpoints: list[Endpoint],
    start: datetime,
    now: datetime,
    *,
    workload: Workload | None = None,
    region: str = ALL,
    metrics: Iterable[str] = ROLLUP_METRICS,
) -> list[EndpointHistory]:
    """Per endpoint: p25/p50/p75 per point for each metric, and availability, over
    [start, now], at the resolution its data calls for (queries/resolution.py)."""
    ids = [e.pk for e in endpoints]
    scope = scope_of(ids, workload, region)
    bucket = resolution.resolution(scope, ids, start, now)
    firsts = resolution.first_runs(scope, ids, start, now)
    # Availability, causes and totals stay hourly for per-run points: one run is a 0 or 1.
    rolled = resolution.HOUR if bucket == resolution.RUN else bucket
    data = collect(scope, start, now, group_by=("endpoint",), bucket=rolled)
    metrics = list(metrics)
    per_run = run_points(scope, start, now, metrics) if bucket == resolution.RUN else {}
    by_endpoint: dict[int, list[tuple[datetime, Agg]]] = defaultdict(list)
    for ((endpoint_id,), when), agg in data.items():
        by_endpoint[endpoint_id].append((when, agg))
    out = []
    for e in endpoints:
        points = sorted(by_endpoint.get(e.pk, []), key=lambda p: p[0])
        totals = Agg()
        for _, agg in points:
            totals.merge(agg)
        causes = [(t, runs_by_cause(agg.status_counts)) for t, agg in points if agg.runs]
        # Each rollup point inside its samples' span, never before the series' first run.
        points = [
            (resolution.placed(t, rolled, firsts.get(e.pk), agg.last_run_at, now), agg)
            for t, agg in points
        ]
        if bucket == resolution.RUN:
            series = {m: per_run.get(e.pk, {}).get(m, []) for m in metrics}
        else:
            series = {m: _rolled_series(points, m) for m in metrics}
        availability = [(t, agg.success_rate, agg.runs) for t, agg in points]
        out.append(
            EndpointHistory(
                e, series, availability, totals, causes, bucket, rolled, firsts.get(e.pk)
            )
        )
    return out


def _rolled_series(points: list[tuple[datetime, Agg]], metric: str) -> list[SeriesPoint]:
    return [
        SeriesPoint(
            t,
            agg.percentile(metric, 25),
            agg.percentile(metric, 50),
            agg.percentile(metric, 75),
            histogram.count(agg.hists[metric]),
            agg.percentile(metric, 95),
        )
        for t, agg in points
        if agg.hists[metric]
    ]


@dataclass(frozen=True)
class Unmeasured:
    """Why a page's workload has no runs though its endpoints may be probed: how many
    of their probes run it (active ones, not run in the window), when the next is due,
    and the other workloads their probes run (each a link on the page)."""

    waiting: int
    next_due: datetime | None
    measured_on: list[Workload]


def unmeasured(endpoints: list[Endpoint], workload: Workload | None, region: str) -> Unmeasured:
    probes = Probe.objects.filter(endpoint__in=endpoints)
    if region != ALL:
        probes = probes.filter(region=region)
    mine = probes.active().filter(workload=workload) if workload else probes.none()
    due = [p.next_run_at for p in mine.only("next_run_at")]
    now = timezone.now()
    others = Workload.objects.filter(probes__in=probes).exclude(pk=getattr(workload, "pk", None))
    return Unmeasured(
        waiting=len(due),
        next_due=min((d for d in due if d > now), default=None),
        measured_on=list(others.distinct().order_by("slug")),
    )


def status_breakdown(agg: Agg) -> list[tuple[str, int, float]]:
    """(status, runs, share) from most to least frequent."""
    total = sum(agg.status_counts.values()) or 1
    return sorted(
        ((s, n, n / total) for s, n in agg.status_counts.items() if n),
        key=lambda x: (-x[1], x[0]),
    )
