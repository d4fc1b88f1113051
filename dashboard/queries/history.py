"""History: per endpoint, percentiles per hour or day for each metric, and availability."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from dashboard import histogram
from dashboard.models import ROLLUP_METRICS
from dashboard.queries.aggregates import (
    ALL,
    DAY,
    DEFAULT_HISTORY_WINDOW,
    HISTORY_WINDOWS,
    Agg,
    collect,
    scope_of,
)
from probes.models import Endpoint, Workload


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
    scope = scope_of([e.pk for e in endpoints], workload, region)
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
