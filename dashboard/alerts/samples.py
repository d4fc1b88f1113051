"""Reading a rule's windows from stored runs: the samples each series had in a time range.

Short windows read raw runs (one grouped query over the run_series_idx index, samples
aggregated into arrays by Postgres); long baselines read the whole hours they span from
hourly rollups, whose histograms stand in for the samples, falling back to raw runs
where no rollups have been written.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.postgres.aggregates import ArrayAgg
from django.db.models import BooleanField, ExpressionWrapper, Max, Q

from dashboard import histogram
from dashboard.alerts.decide import Stats
from dashboard.models import RunRollup
from probes.engine.contract import SPEED_METRICS
from probes.models import ProbeRun
from probes.platform.timefloors import floor_hour

Series = tuple[int, int, str]  # endpoint id, workload id, region
# Baselines at least this long come from hourly rollups rather than every raw run.
ROLLUP_BASELINE_FROM = timedelta(hours=6)
HOUR = timedelta(hours=1)
# An error-rate rule counts provider-side failures only: 429s and 5xx. Our own timeouts
# and protocol errors are not a provider's availability (and never enter latency stats).
ERROR_STATUSES = ("rate_limited", "server_error")
# The same hours of this many previous days make a seasonal baseline.
SEASON_DAYS = 7


def usable_runs(metric: str) -> Q:
    """Runs that count for a per-run metric: failed runs never enter latency or speed
    statistics, nor do runs our client may have set (client_bound), and short outputs are
    left out of speed (metrics.md; contract.counts_for_metric). A run group's
    requests ("step") do not count on their own: its summary row does, as in rollups."""
    q = Q(status="ok", client_bound=False, **{f"{metric}__isnull": False}) & ~Q(role="step")
    if metric in SPEED_METRICS:
        q &= Q(short_output=False, stopped_short=False)
    return q


def _flag(condition: Q) -> ExpressionWrapper:
    return ExpressionWrapper(condition, output_field=BooleanField())


def _runs(scope: Q, ranges: list[tuple[datetime, datetime]]):
    when = Q()
    for start, end in ranges:
        when |= Q(started_at__gte=start, started_at__lt=end)
    return (
        ProbeRun.objects.filter(scope, when)
        .exclude(role="step")  # a group counts once, by its summary row (as in rollups)
        .order_by()
        .values_list("endpoint_id", "workload_id", "region")
    )


def raw_stats(
    scope: Q, metric: str, ranges: list[tuple[datetime, datetime]]
) -> dict[Series, Stats]:
    """Every series' samples in the union of `ranges` (half-open)."""
    runs = _runs(scope, ranges)
    if metric == "success_rate":
        rows = runs.annotate(ok=ArrayAgg(_flag(Q(status="ok"))))
        return {(e, w, r): Stats.of_rate(flags) for e, w, r, flags in rows}
    if metric == "error_rate":
        rows = runs.annotate(bad=ArrayAgg(_flag(Q(status__in=ERROR_STATUSES))))
        return {(e, w, r): Stats.of_rate(flags) for e, w, r, flags in rows}
    # Oldest first: the sequential test reads the recent window's runs in order.
    usable = usable_runs(metric)
    rows = runs.annotate(
        values=ArrayAgg(metric, filter=usable, default=[], order_by="started_at"),
        times=ArrayAgg("started_at", filter=usable, default=[], order_by="started_at"),
    )
    return {(e, w, r): Stats.of(values, times) for e, w, r, values, times in rows}


def staleness(scope: Q, now: datetime, lookback: timedelta) -> dict[Series, Stats]:
    """Minutes since each series' last successful run, for every series that ran at all
    in `lookback` (one that never succeeded counts from the lookback's start)."""
    rows = _runs(scope, [(now - lookback, now)]).annotate(
        last_ok=Max("started_at", filter=Q(status="ok"))
    )
    stats = {}
    for e, w, r, last_ok in rows:
        age = (now - (last_ok or now - lookback)).total_seconds() / 60
        stats[(e, w, r)] = Stats(1, age, (age,))
    return stats


def rollup_stats(
    scope: Q, metric: str, start: datetime, end: datetime
) -> dict[Series, Stats] | None:
    """The whole hours of [start, end) from hourly rollups, or None when there are none
    (rollups not maintained yet): the caller then reads raw runs. Dropping the partial
    hours at both ends changes a 6 h+ baseline by at most two hours of its span."""
    first = floor_hour(start) + (HOUR if floor_hour(start) < start else timedelta(0))
    rate = metric in ("success_rate", "error_rate")
    fields = ["endpoint_id", "workload_id", "region", "runs", "ok_runs", "status_counts"]
    if not rate:
        fields.append(f"hist_{metric}")
    rows = (
        RunRollup.objects.filter(
            scope,
            granularity=RunRollup.HOUR,
            bucket_start__gte=first,
            bucket_start__lt=floor_hour(end),
        )
        .order_by()
        .values_list(*fields)
    )
    totals: dict[Series, list] = {}
    for endpoint_id, workload_id, region, runs, ok_runs, counts, *hist in rows:
        total = totals.setdefault((endpoint_id, workload_id, region), [0, 0, []])
        total[0] += runs
        if metric == "error_rate":
            total[1] += sum((counts or {}).get(status, 0) for status in ERROR_STATUSES)
        else:
            total[1] += ok_runs
        total[2].append(hist[0] if hist else None)
    if not totals:
        return None
    if rate:
        return {
            series: Stats.of_rate([True] * hits + [False] * (n - hits))
            for series, (n, hits, _) in totals.items()
            if n
        }
    return {
        series: Stats.of_histogram(histogram.merge(hists))
        for series, (_, _, hists) in totals.items()
    }


def baseline_stats(scope: Q, metric: str, start: datetime, end: datetime) -> dict[Series, Stats]:
    if end - start >= ROLLUP_BASELINE_FROM:
        from_rollups = rollup_stats(scope, metric, start, end)
        if from_rollups is not None:
            return from_rollups
    return raw_stats(scope, metric, [(start, end)])


def same_hours_ranges(now: datetime, width: timedelta) -> list[tuple[datetime, datetime]]:
    """The same time of day on each of the previous SEASON_DAYS days, `width` either
    side: provider latency follows daily load, so 3 pm is compared with earlier 3 pms."""
    return [
        (now - timedelta(days=day) - width, now - timedelta(days=day) + width)
        for day in range(1, SEASON_DAYS + 1)
    ]
