"""What the alert page shows: the series around an alert, and the runs it was decided on."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from dashboard.alerts.models import AlertEvent
from dashboard.alerts.samples import usable_runs
from probes.models import ProbeRun

# The chart shows this much before the recent window (at least the rule's baseline).
_CONTEXT = timedelta(hours=6)
_MAX_POINTS = 2000


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


def event_chart(event: AlertEvent) -> dict | None:
    """A plotly figure: the metric's runs, the baseline band (baseline median up to the
    limit), the recent window shaded and the moment it changed."""
    if event.metric in ("success_rate", "error_rate", "minutes_since_ok"):
        return None
    decided = _decided_at(event)
    window_start = event.window_start or decided
    rule = event.rule
    context = max(_CONTEXT, rule.baseline_window if rule else _CONTEXT)
    start = window_start - context
    end = event.resolved_at or timezone.now()
    end = min(end, decided + context) if event.resolved_at is None else end + timedelta(hours=1)
    rows = list(
        _series_runs(event)
        .filter(usable_runs(event.metric), started_at__gte=start, started_at__lt=end)
        .order_by("started_at")
        .values_list("pk", "started_at", event.metric)[:_MAX_POINTS]
    )
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": event.metric_label,
            "x": [at.isoformat() for _, at, _ in rows],
            "y": [value for _, _, value in rows],
            "customdata": [pk for pk, _, _ in rows],
            "hovertemplate": "run %{customdata}: %{y:.4g}<extra></extra>",
        }
    ]
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
            "margin": {"l": 50, "r": 10, "t": 10, "b": 40},
            "yaxis": {"title": {"text": event.metric_label}},
            "showlegend": False,
        },
    }
