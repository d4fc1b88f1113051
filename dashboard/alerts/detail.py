"""What the alert page shows: the series around an alert, and the runs it was decided on."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from dashboard.alerts.models import AlertEvent
from dashboard.alerts.samples import ERROR_STATUSES, usable_runs
from dashboard.charts import _date_axis
from dashboard.models import ROLLUP_METRICS
from dashboard.queries import resolution
from probes.models import ProbeRun

# The chart shows this much before the recent window (at least the rule's baseline).
_CONTEXT = timedelta(hours=6)
_MAX_POINTS = 2000
# Error and success rates are drawn per bucket of this length (a single run is 0 or 1).
_BUCKET = timedelta(minutes=10)


def _series_runs(event: AlertEvent) -> QuerySet[ProbeRun]:
    return ProbeRun.objects.listing().filter(
        endpoint_id=event.endpoint_id, workload_id=event.workload_id, region=event.region
    )


def _decided_at(event: AlertEvent):
    return event.fired_at or event.started_at


def runs_used(event: AlertEvent) -> list[ProbeRun]:
    """The recent window's runs when it fired (the ones the test compared)."""
    if event.window_start is None or event.metric == "minutes_since_ok":
        return []
    runs = _series_runs(event).filter(
        started_at__gte=event.window_start, started_at__lt=_decided_at(event)
    )
    if event.metric not in ("success_rate", "error_rate"):
        runs = runs.filter(usable_runs(event.metric))
    return list(runs.order_by("started_at")[:200])


def _span(event: AlertEvent):
    """The chart's time range: its baseline window (a regression's; _CONTEXT for other
    rules) before the window that fired it, until it resolved (plus an hour) or
    _CONTEXT after it fired, and never before the series' first run: a baseline that
    began with the install is drawn from there, not hours of empty axis before it."""
    decided = _decided_at(event)
    window_start = event.window_start or decided
    rule = event.rule
    regression = rule is not None and event.baseline_value is not None
    start = window_start - (rule.baseline_window if regression else _CONTEXT)
    end = event.resolved_at or timezone.now()
    end = min(end, decided + _CONTEXT) if event.resolved_at is None else end + timedelta(hours=1)
    first = (
        _series_runs(event)
        .exclude(role="step")
        .filter(started_at__gte=start, started_at__lt=end)
        .order_by("started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    start = max(start, first) if first else start
    return start, window_start, decided, end


def _resolution(event: AlertEvent, start, end) -> str:
    """The one rule every chart follows (dashboard/queries/resolution.py)."""
    scope = Q(workload_id=event.workload_id, region=event.region)
    return resolution.resolution(scope, [event.endpoint_id], start, end)


def _rate_points(event: AlertEvent, start, end, grain: str) -> tuple[list, list, list]:
    """The share of failed (or ok) runs per _BUCKET (per hour or day where the window
    holds more runs than a chart draws one by one), as the rule counts them."""
    length = _BUCKET if grain == resolution.RUN else timedelta(hours=1 if grain == "hour" else 24)
    rows = (
        _series_runs(event)
        .exclude(role="step")
        .filter(started_at__gte=start, started_at__lt=end)
        .order_by("started_at")
        .values_list("started_at", "status")
    )
    buckets: dict = {}
    for at, status in rows.iterator(chunk_size=5000):
        key = start + (at - start) // length * length
        hit = status == "ok" if event.metric == "success_rate" else status in ERROR_STATUSES
        hits, runs = buckets.get(key, (0, 0))
        buckets[key] = (hits + hit, runs + 1)
    xs = [min(key + length / 2, end).isoformat() for key in buckets]
    return xs, [hits / runs for hits, runs in buckets.values()], [n for _, n in buckets.values()]


def _staleness_points(event: AlertEvent, start, end) -> tuple[list, list, list]:
    """Minutes since the last ok run, at each run (a sawtooth that climbs while runs fail)."""
    rows = list(
        _series_runs(event)
        .exclude(role="step")
        .filter(started_at__gte=start, started_at__lt=end)
        .order_by("started_at")
        .values_list("pk", "started_at", "status")[:_MAX_POINTS]
    )
    last_ok = start
    xs, ys, pks = [], [], []
    for pk, at, status in rows:
        if status == "ok":
            last_ok = at
        xs.append(at.isoformat())
        ys.append(round((at - last_ok).total_seconds() / 60, 1))
        pks.append(pk)
    return xs, ys, pks


def _rolled_points(event: AlertEvent, start, end) -> tuple[list, list, list]:
    """Hourly or daily medians of the series, as the history charts draw them."""
    from dashboard.queries.history import history_between

    (h,) = history_between(
        [event.endpoint],
        start,
        end,
        workload=event.workload,
        region=event.region,
        metrics=[event.metric],
    )
    points = h.series[event.metric]
    return [p.t.isoformat() for p in points], [p.p50 for p in points], [p.samples for p in points]


_DAY_MS = 86_400_000
# Hour ticks read the time, day ticks the date (the page says the alert's dates in words).
_ONE_LINE = [
    {"dtickrange": [None, _DAY_MS], "value": "%H:%M"},
    {"dtickrange": [_DAY_MS, None], "value": "%b %d"},
]


def _padded(start, end) -> list[str]:
    pad = max((end - start) * 0.02, timedelta(minutes=1))
    return [(start - pad).isoformat(), (end + pad).isoformat()]


def event_chart(event: AlertEvent) -> dict:
    """A plotly figure for every kind of alert: the series around it (each run's value;
    the failed share per 10 minutes for error and success rates; minutes since the last
    ok run for freshness), the recent window shaded, the moment it changed, the limit it
    crossed, and for a regression the baseline band."""
    start, window_start, decided, end = _span(event)
    grain = _resolution(event, start, end)
    if event.metric in ("success_rate", "error_rate"):
        xs, ys, counts = _rate_points(event, start, end, grain)
        trace = {
            "type": "scatter",
            "mode": "lines+markers",
            "line": {"shape": "hv"},
            "customdata": counts,
            "hovertemplate": "%{y:.0%} of %{customdata} runs<extra></extra>",
        }
        share = "ok" if event.metric == "success_rate" else "failed (429, 5xx)"
        yaxis = {"title": {"text": f"{share} per 10 min"}, "tickformat": ".0%"}
    elif event.metric == "minutes_since_ok":
        xs, ys, counts = _staleness_points(event, start, end)
        trace = {
            "type": "scatter",
            "mode": "lines+markers",
            "customdata": counts,
            "hovertemplate": "run %{customdata}: %{y} min since an ok run<extra></extra>",
        }
        yaxis = {"title": {"text": "minutes since an ok run"}, "rangemode": "tozero"}
    elif grain != resolution.RUN and event.metric in ROLLUP_METRICS:
        xs, ys, counts = _rolled_points(event, start, end)
        trace = {
            "type": "scatter",
            "mode": "lines+markers",
            "customdata": counts,
            "hovertemplate": f"median %{{y:.4g}} of %{{customdata}} runs ({grain})<extra></extra>",
        }
        yaxis = {"title": {"text": event.metric_label}}
    else:
        rows = list(
            _series_runs(event)
            .filter(usable_runs(event.metric), started_at__gte=start, started_at__lt=end)
            .order_by("started_at")
            .values_list("pk", "started_at", event.metric)[:_MAX_POINTS]
        )
        xs = [at.isoformat() for _, at, _ in rows]
        ys = [value for _, _, value in rows]
        trace = {
            "type": "scatter",
            "mode": "markers",
            "customdata": [pk for pk, _, _ in rows],
            "hovertemplate": "run %{customdata}: %{y:.4g}<extra></extra>",
        }
        yaxis = {"title": {"text": event.metric_label}}
    data = [{**trace, "name": event.metric_label, "x": xs, "y": ys}]
    shapes = [
        {  # the recent window that fired it
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": window_start.isoformat(),
            "x1": decided.isoformat(),
            "y0": 0,
            "y1": 1,
            "fillcolor": "rgba(217,48,37,0.12)",
            "line": {"width": 0},
        },
        {  # the moment it changed
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": event.started_at.isoformat(),
            "x1": event.started_at.isoformat(),
            "y0": 0,
            "y1": 1,
            "line": {"color": "#d93025", "dash": "dot"},
        },
    ]
    shapes.append(
        {  # the limit it crossed
            "type": "line",
            "xref": "paper",
            "yref": "y",
            "x0": 0,
            "x1": 1,
            "y0": event.limit_value,
            "y1": event.limit_value,
            "line": {"color": "#d93025", "width": 1, "dash": "dash"},
        }
    )
    if event.baseline_value is not None and event.limit_value is not None:
        low, high = sorted((event.baseline_value, event.limit_value))
        shapes.append(
            {  # the baseline band: from its median to where it would fire
                "type": "rect",
                "xref": "x",
                "yref": "y",
                "x0": start.isoformat(),
                "x1": window_start.isoformat(),
                "y0": low,
                "y1": high,
                "fillcolor": "rgba(26,115,232,0.15)",
                "line": {"width": 0},
            }
        )
    return {
        "data": data,
        "layout": {
            "shapes": shapes,
            "margin": {"l": 64, "r": 10, "t": 10, "b": 40},
            # Standoffs keep the y axis's 0 off the x axis's first date in the corner. The
            # axis spans the baseline and recent windows (from the first run), a little
            # margin each side so edge points are not cut in half. It ends now, so where
            # its ticks fall moves with the clock: labels are one line (plotly's two-line
            # "00:00 / Nov 30, 2026" overlapped the next tick at a phone's width) and one
            # past the plot's edge is hidden, as on the history charts.
            "xaxis": _date_axis(
                ticklabelstandoff=8, range=_padded(start, end), tickformatstops=_ONE_LINE
            ),
            "yaxis": {**yaxis, "ticklabelstandoff": 6},
            "showlegend": False,
        },
    }
