"""Replaying rules over stored history: the samples of every series a rule covers (raw
runs, and hourly rollups where the raw runs were pruned), and a rule's backtest summary
for its page ("would have fired N times in 30 days"). `backtest_alerts` prints the same
replay change by change.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.core.cache import cache
from django.db.models import Q

from dashboard import histogram
from dashboard.alerts.models import SAME_HOURS, AlertRule
from dashboard.alerts.replay import Replay, Series, Windows, replay
from dashboard.alerts.samples import ERROR_STATUSES, usable_runs
from dashboard.alerts.schedule import EVALUATE_EVERY_S
from dashboard.models import RunRollup
from probes.models import ProbeRun

SeriesKey = tuple[int, int, str]
# A rule page's backtest is cached this long (and recomputed when the rule is edited).
BACKTEST_CACHE_S = 3600
# A page view replays at most this many series (~0.1 s each for 30 days of 5-minute runs);
# a wider rule's page points to backtest_alerts instead of holding the request for minutes.
PAGE_BACKTEST_MAX_SERIES = 40


def windows_of(rule: AlertRule) -> Windows:
    return Windows(rule.recent_window, rule.baseline_window, rule.baseline_mode == SAME_HOURS)


def history_start(start: datetime, windows: Windows) -> datetime:
    """How far back before `start` the replay needs samples (its first baseline)."""
    if windows.same_hours:
        return start - timedelta(days=8)
    return start - windows.baseline - windows.recent


def load_series(scope: Q, metric: str, start: datetime, end: datetime) -> dict[SeriesKey, Series]:
    """Every series' samples in [start, end): raw runs, and rollup hours where the raw
    runs are gone (pruned)."""
    times: dict[SeriesKey, list[float]] = defaultdict(list)
    values: dict[SeriesKey, list[float]] = defaultdict(list)
    raw_hours: set[tuple[SeriesKey, datetime]] = set()
    # A run group counts once, by its summary row (as the evaluator and rollups count it).
    runs = ProbeRun.objects.filter(scope, started_at__gte=start, started_at__lt=end).exclude(
        role="step"
    )
    if metric == "success_rate":
        rows = runs.values_list("endpoint_id", "workload_id", "region", "started_at", "status")
        convert = lambda status: 1.0 if status == "ok" else 0.0  # noqa: E731
    elif metric == "error_rate":
        rows = runs.values_list("endpoint_id", "workload_id", "region", "started_at", "status")
        convert = lambda status: 1.0 if status in ERROR_STATUSES else 0.0  # noqa: E731
    else:
        rows = runs.filter(usable_runs(metric)).values_list(
            "endpoint_id", "workload_id", "region", "started_at", metric
        )
        convert = float
    for endpoint_id, workload_id, region, at, value in rows.iterator(chunk_size=20_000):
        key = (endpoint_id, workload_id, region)
        times[key].append(at.timestamp())
        values[key].append(convert(value))
        raw_hours.add((key, at.replace(minute=0, second=0, microsecond=0)))
    if metric not in ("success_rate", "error_rate"):
        rollups = RunRollup.objects.filter(
            scope, granularity=RunRollup.HOUR, bucket_start__gte=start, bucket_start__lt=end
        ).values_list("endpoint_id", "workload_id", "region", "bucket_start", f"hist_{metric}")
        for endpoint_id, workload_id, region, hour, hist in rollups.iterator(chunk_size=5_000):
            key = (endpoint_id, workload_id, region)
            if (key, hour) in raw_hours or not hist:
                continue
            samples = [
                histogram.bucket_value(int(bucket)) for bucket, n in hist.items() for _ in range(n)
            ]
            for i, value in enumerate(samples):  # spread evenly over their hour
                times[key].append(hour.timestamp() + 3600 * (i + 0.5) / len(samples))
                values[key].append(value)
    return {key: Series(times[key], values[key]) for key in times}


def replay_rule(
    rule: AlertRule, start: datetime, end: datetime, scope: Q | None = None
) -> dict[SeriesKey, Replay]:
    """The rule replayed over stored history, every series it covers, at the evaluator's
    cadence."""
    windows = windows_of(rule)
    scope = rule.runs_filter() & (scope or Q())
    series = load_series(scope, rule.metric, history_start(start, windows), end)
    condition, timing = rule.as_condition(), rule.as_timing()
    cadence = timedelta(seconds=EVALUATE_EVERY_S)
    return {
        key: replay(series[key], condition, timing, windows, start, end, cadence)
        for key in sorted(series)
    }


def rule_backtest(rule: AlertRule, now: datetime, days: int = 30) -> dict:
    """How often the rule, as it is set now, would have fired over the stored history of
    the last `days`: {"fired", "series", "days", "by_series": [[endpoint, workload,
    region, fired], ...]}. Cached for an hour per rule version."""
    if rule.metric == "minutes_since_ok":
        return {"unsupported": "Staleness rules watch absence: there is nothing to replay."}
    stamp = rule.updated.timestamp() if rule.updated else 0
    key = f"alerts:backtest:{rule.pk}:{stamp}:{days}:{now:%Y%m%d%H}"
    found = cache.get(key)
    if found is not None:
        return found
    start = now - timedelta(days=days)
    covered = (
        ProbeRun.objects.filter(rule.runs_filter(), started_at__gte=start)
        .order_by()
        .values("endpoint_id", "workload_id", "region")
        .distinct()
        .count()
    )
    if covered > PAGE_BACKTEST_MAX_SERIES:
        return {
            "unsupported": f"{covered} series: too many to replay for a page; run "
            f"backtest_alerts --rule {rule.pk} --days {days}."
        }
    replays = replay_rule(rule, start, now)
    by_series = [
        [*series, sum(1 for c in result.changes if c.state == "firing")]
        for series, result in replays.items()
    ]
    summary = {
        "fired": sum(row[-1] for row in by_series),
        "series": len(by_series),
        "days": days,
        "by_series": by_series,
    }
    cache.set(key, summary, BACKTEST_CACHE_S)
    return summary
