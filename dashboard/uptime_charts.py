"""Uptime by cause, drawn: a leaderboard row's thin strip of its runs split by cause,
and an endpoint's runs per hour or day stacked by cause (ok, rate-limited, server error,
timeout, other), so a reader sees when requests failed and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from dashboard.charts import Span, _empty, _figure, _grid, _window_axis
from dashboard.definitions import AVAILABILITY_CAUSES
from dashboard.queries import resolution
from dashboard.queries.history import EndpointHistory

CAUSE_COLORS = {
    "ok": "#059669",
    "rate_limited": "#d97706",
    "server_error": "#dc2626",
    "timeout": "#7c3aed",
    "other": "#6b7280",
}


@dataclass(frozen=True)
class StripPart:
    x: float
    width: float
    color: str
    label: str
    share: float


def cause_strip(shares: dict[str, float] | None, width: int = 60) -> list[StripPart]:
    """A leaderboard row's runs as one thin bar split by cause (ok, 429, 5xx, timeout,
    other), widths proportional to shares; empty without runs."""
    parts: list[StripPart] = []
    x = 0.0
    for cause, share in (shares or {}).items():
        if share:
            w = share * width
            parts.append(
                StripPart(
                    round(x, 2), round(w, 2), CAUSE_COLORS[cause], AVAILABILITY_CAUSES[cause], share
                )
            )
            x += w
    return parts


def bar_span(
    bucket_start: datetime, histories: Sequence[EndpointHistory], span: Span | None
) -> tuple[datetime, float]:
    """Where a bucket's bar starts and how wide it is (ms): its bucket, from the first run
    of the page's series (a fresh install's first hour is not drawn from before it) to
    now. Plotly's default centres a bar on x, as wide as the closest two are apart:
    mid-bucket, and one hairline for a single bucket."""
    length = resolution.bucket_length(histories[0].causes_bucket)
    firsts = [h.first_run for h in histories if h.first_run]
    start = max(bucket_start, min(firsts)) if firsts else bucket_start
    end = bucket_start + length
    if span:
        end = min(end, span[1])
    return start, max((end - start).total_seconds() * 1000, 0.0)


def availability_by_cause(histories: Sequence[EndpointHistory], span: Span | None = None) -> dict:
    """Runs per hour or day stacked by cause, all endpoints of the page together: when
    requests failed, and why (rate limits, 5xx, timeouts)."""
    fig = _figure(
        "Uptime by cause (runs per interval)",
        barmode="stack",
        bargap=0,
        hovermode="x unified",
        xaxis=_window_axis(span, [t for h in histories for t, _ in h.causes]),
        yaxis=_grid(title={"text": "runs"}, rangemode="tozero"),
    )
    per_bucket: dict[datetime, dict[str, int]] = {}
    for h in histories:
        for t, counts in h.causes:
            target = per_bucket.setdefault(t, dict.fromkeys(AVAILABILITY_CAUSES, 0))
            for cause, n in counts.items():
                target[cause] += n
    times = sorted(per_bucket)
    spans = [bar_span(t, histories, span) for t in times]
    for cause, label in AVAILABILITY_CAUSES.items():
        ys = [per_bucket[t][cause] for t in times]
        if any(ys):
            fig["data"].append(
                dict(
                    type="bar",
                    x=[start.isoformat() for start, _ in spans],
                    y=ys,
                    width=[ms for _, ms in spans],
                    offset=0,
                    name=label,
                    marker={"color": CAUSE_COLORS[cause], "line": {"width": 0}},
                    hovertemplate="%{y} runs<extra>" + label + "</extra>",
                )
            )
    if not fig["data"]:
        return _empty(fig, "No runs in this window.")
    return fig
