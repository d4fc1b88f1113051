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
from dashboard.queries.aggregates import (
    ALL,
    DAY,
    DEFAULT_HISTORY_WINDOW,
    HISTORY_WINDOWS,
    HOUR,
    Agg,
    collect,
    scope_of,
)
from probes.engine.contract import counts_for_metric
from probes.models import Endpoint, ProbeRun, Workload


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
    causes: list[tuple[datetime, dict[str, int]]] = field(default_factory=list)  # runs by cause


# Windows this short draw one point per run (raw runs, a few hundred at most): an hour
# of hourly buckets would be one or two dots.
RUN_POINTS_UP_TO = 6 * HOUR


def history_bucket(window: str) -> str:
    """A point per run up to 6 h, hourly points up to a week, daily beyond."""
    span = HISTORY_WINDOWS[window]
    if span <= RUN_POINTS_UP_TO:
        return "run"
    return "hour" if span <= 7 * DAY else "day"


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
    """Per endpoint: p25/p50/p75 per time bucket for each metric, and availability."""
    now = now or timezone.now()
    start = now - HISTORY_WINDOWS[window]
    bucket = history_bucket(window)
    scope = scope_of([e.pk for e in endpoints], workload, region)
    # Availability, causes and totals stay hourly for per-run windows: one run is a 0 or 1.
    data = collect(
        scope, start, now, group_by=("endpoint",), bucket="hour" if bucket == "run" else bucket
    )
    metrics = list(metrics)
    per_run = run_points(scope, start, now, metrics) if bucket == "run" else {}
    by_endpoint: dict[int, list[tuple[datetime, Agg]]] = defaultdict(list)
    for ((endpoint_id,), when), agg in data.items():
        by_endpoint[endpoint_id].append((when, agg))
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
                    agg.percentile(m, 95),
                )
                for t, agg in points
                if agg.hists[m]
            ]
            for m in metrics
        }
        if bucket == "run":
            series = {m: per_run.get(e.pk, {}).get(m, []) for m in metrics}
        availability = [(t, agg.success_rate, agg.runs) for t, agg in points]
        causes = [(t, runs_by_cause(agg.status_counts)) for t, agg in points if agg.runs]
        out.append(EndpointHistory(e, series, availability, totals, causes))
    return out


def status_breakdown(agg: Agg) -> list[tuple[str, int, float]]:
    """(status, runs, share) from most to least frequent."""
    total = sum(agg.status_counts.values()) or 1
    return sorted(
        ((s, n, n / total) for s, n in agg.status_counts.items() if n),
        key=lambda x: (-x[1], x[0]),
    )
