"""Plotly figures, built in Python, handed to the page as JSON (static/js/charts.js draws).

Each function takes read-side data (dashboard/queries/) and returns a plotly figure as
a plain dict ({"data": [...], "layout": {...}}) ready for `json_script`. Plain dicts, not
plotly.graph_objects: validating every property on every page view cost more than the
rest of the leaderboard; tests validate each figure through graph_objects instead.
Sparklines are tiny inline SVGs: dozens per table, no JS.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from dashboard.definitions import METRICS
from dashboard.queries.history import EndpointHistory
from dashboard.queries.leaderboard import Point, Row

ANSWER = "#2563eb"
REASONING = "#d97706"
SIMULATED = "#9ca3af"
PALETTE = [
    "#2563eb",
    "#dc2626",
    "#059669",
    "#d97706",
    "#7c3aed",
    "#0891b2",
    "#db2777",
    "#65a30d",
    "#4b5563",
    "#ea580c",
]
_LAYOUT = {
    "margin": {"l": 56, "r": 16, "t": 36, "b": 44},
    "height": 340,
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "paper_bgcolor": "rgba(0,0,0,0)",
    "plot_bgcolor": "rgba(0,0,0,0)",
    # Far enough below the plot to clear two-line date ticks and an axis title (at the
    # fixed height); plotly grows the bottom margin to fit it however many rows it wraps to.
    "legend": {"orientation": "h", "y": -0.32, "yanchor": "top", "x": 0},
    "hovermode": "closest",
}


def _figure(title: str, **layout) -> dict:
    return {"data": [], "layout": {**_LAYOUT, "title": {"text": title, "x": 0}, **layout}}


def _grid(**axis) -> dict:
    return {"gridcolor": "#e5e7eb", **axis}


def _axis(metric: str) -> dict:
    m = METRICS[metric]
    return {"title": {"text": f"{m.label} ({m.unit})"}, "gridcolor": "#e5e7eb", "zeroline": False}


def _provider_name(provider, *, short: bool = False) -> str:
    """A provider's name, marked when Inferwatch's own simulator serves it."""
    if not provider.simulated:
        return provider.name
    return f"{provider.name} ({'sim' if short else 'simulated'})"


def _label(row: Row) -> str:
    e = row.endpoint
    return f"{_provider_name(e.provider)} · {e.canonical_model.name}"


def _endpoint_name(h: EndpointHistory) -> str:
    return f"{_provider_name(h.endpoint.provider)} · {h.endpoint.model_id}"


def _short_labels(rows: Sequence[Row]) -> list[str]:
    """Provider names, plus the model when several models share the chart."""
    several_models = len({r.endpoint.canonical_model_id for r in rows}) > 1
    return [
        f"{_provider_name(r.provider, short=True)} · {r.endpoint.canonical_model.name}"
        if several_models
        else _provider_name(r.provider, short=True)
        for r in rows
    ]


def _empty(fig: dict, message: str) -> dict:
    """A chart with nothing to draw says why, instead of showing bare axes (−1…6)."""
    fig["layout"]["xaxis"] = {**fig["layout"].get("xaxis", {}), "visible": False}
    fig["layout"]["yaxis"] = {**fig["layout"].get("yaxis", {}), "visible": False}
    fig["layout"]["annotations"] = [
        {
            # Wrapped by hand: plotly does not, and a phone's chart is ~45 characters wide.
            "text": "<br>".join(textwrap.wrap(message, 40)),
            "xref": "paper",
            "yref": "paper",
            "x": 0.5,
            "y": 0.5,
            "showarrow": False,
            "font": {"size": 13, "color": "#6b7280"},
        }
    ]
    fig["layout"]["meta"] = {"empty": True}
    return fig


def _padded(values: Sequence[float], share: float = 0.12) -> list[float]:
    """An axis range with room around the points, so labels beside them are not clipped
    at the chart's edge."""
    lo, hi = min(values), max(values)
    pad = (hi - lo) * share or abs(hi) * share or 1.0
    return [lo - pad, hi + pad]


def _scatter(rows: Sequence[Row], x: str, y: str, title: str) -> dict:
    # Only ranked rows (queries/ranking.py): two runs are not a place on a chart either.
    points = [r for r in rows if r.rank and r.figure(x) is not None and r.figure(y) is not None]
    # Labels are placed in trace order and the last ones dropped where crowded
    # (static/js/charts.js): the operator's own endpoints before the simulator's, so a
    # demo's dozen simulated points never hide the one endpoint the user added.
    points.sort(key=lambda r: r.provider.simulated)
    fig = _figure(title, showlegend=False, xaxis=_axis(x), yaxis=_axis(y))
    if not points:
        return _empty(fig, _why_empty(rows, x, y))
    xs = [float(r.figure(x)) for r in points]
    ys = [float(r.figure(y)) for r in points]
    fig["layout"]["xaxis"]["range"] = _padded(xs)
    fig["layout"]["yaxis"]["range"] = _padded(ys, share=0.18)  # labels sit above points
    fig["data"].append(
        dict(
            type="scatter",
            x=xs,
            y=ys,
            text=_short_labels(points),
            customdata=[_label(r) for r in points],
            mode="markers+text",
            textposition="top center",
            cliponaxis=False,
            marker={
                "size": 11,
                "color": [SIMULATED if r.provider.simulated else ANSWER for r in points],
                "symbol": ["circle-open" if r.provider.simulated else "circle" for r in points],
                "line": {"width": 2},
            },
            hovertemplate="%{customdata}<br>%{x:,.2f} · %{y:,.0f}<extra></extra>",
            name="endpoints",
        )
    )
    return fig


def _why_empty(rows: Sequence[Row], x: str, y: str) -> str:
    """The true reason no row has both figures: no runs, no prices, or no such median."""
    measured = [r for r in rows if r.samples]
    if not measured:
        return "No measured runs in this window."
    for key in (x, y):
        if key == "blended_price" and all(r.blended_price is None for r in measured):
            return "No endpoint shown has a price yet: add list prices in the admin (Endpoints)."
    for key in (x, y):
        if all(r.figure(key) is None for r in measured):
            return f"No row has a {METRICS[key].label} median in this window."
    if not any(r.rank for r in rows):
        return "No row ranks yet in this window: " + measured[0].unranked_reason
    return "No row has both figures in this window."


def speed_vs_price(rows: Sequence[Row], metric: str = "output_tps") -> dict:
    """The board's rank metric (median; output speed where the workload has one) against
    blended price: the price of a better figure."""
    return _scatter(rows, "blended_price", metric, f"{METRICS[metric].label} vs blended price")


def ttft_vs_speed(rows: Sequence[Row], metric: str = "output_tps") -> dict:
    """Time to first token against the board's rank metric (end-to-end time where that is
    TTFT itself): where each endpoint's wait and its headline meet."""
    x = "e2e_ms" if metric == "ttft_ms" else metric
    return _scatter(rows, x, "ttft_ms", f"TTFT vs {METRICS[x].label}")


Span = tuple[datetime, datetime]


def _date_axis(**axis) -> dict:
    """A time axis whose tick labels stay within the plot's width. Where the ticks fall
    moves with the clock (the axis ends now): a label centred on a tick near the left
    edge reached into the y axis's labels ("12:00 Nov 30" over its "0", at 08:45 only),
    one near the right edge past the chart. Such a label is hidden; hover keeps the time."""
    return _grid(type="date", ticklabeloverflow="hide past domain", **axis)


class PageSpan(tuple):
    """A page's one time axis (page_span): every chart of the page draws exactly it."""


def _narrowed(span: Span, times: Iterable[datetime]) -> tuple[datetime, datetime]:
    """The window, or when the data is shorter, from a little before its first point:
    ten minutes of runs are not one dot at the edge of a week."""
    start, end = span
    first = min(times, default=None)
    if first is not None:
        margin = max((end - first) * 0.05, timedelta(minutes=2))
        start = max(start, first - margin)
    return start, end


def page_span(span: Span, histories: Sequence[EndpointHistory]) -> PageSpan:
    """One time axis for every chart of a history page, from the earliest point of any of
    them: the availability bars line up under the latency charts above them."""
    times = [
        t
        for h in histories
        for t in (
            *(p.t for points in h.series.values() for p in points),
            *(t for t, _, _ in h.availability),
            *(max(t, h.first_run or t) for t, _ in h.causes),  # where their bars start
        )
    ]
    return PageSpan(_narrowed(span, times))


def _window_axis(span: Span | None, times: Sequence[datetime] = ()) -> dict:
    """The x axis ends now and starts where the window does, or a little before the
    chart's first point (the page's, for a PageSpan). Never a millisecond around a
    single point."""
    if not span:
        return _grid()
    start, end = span if isinstance(span, PageSpan) else _narrowed(span, times)
    return _date_axis(range=[start.isoformat(), end.isoformat()])


MARK_COLORS = {"fired": "#dc2626", "resolved": "#059669", "config": "#6b7280"}


def _with_marks(fig: dict, marks: Sequence) -> None:
    """Alerts and configuration changes as dotted vertical lines, each with a marker at
    the top whose hover says what happened (no text on the chart: labels would collide)."""
    if not marks or not fig["data"]:
        return
    fig["layout"]["shapes"] = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": m.t.isoformat(),
            "x1": m.t.isoformat(),
            "y0": 0,
            "y1": 1,
            "line": {"dash": "dot", "width": 1, "color": MARK_COLORS[m.kind]},
        }
        for m in marks
    ]
    top = max((y for trace in fig["data"] for y in trace["y"] if y is not None), default=0)
    fig["data"].append(
        dict(
            type="scatter",
            x=[m.t for m in marks],
            y=[top] * len(marks),
            text=[m.label for m in marks],
            mode="markers",
            marker={
                "symbol": "triangle-down",
                "size": 9,
                "color": [MARK_COLORS[m.kind] for m in marks],
            },
            name="events",
            showlegend=False,
            hovertemplate="%{text}<extra></extra>",
        )
    )


def history(
    histories: Sequence[EndpointHistory],
    metric: str,
    span: Span | None = None,
    marks: Sequence = (),
) -> dict:
    """Median line per endpoint with its p25–p75 band and p95, over the window, with the
    alerts and configuration changes inside it (web/marks.py)."""
    fig = _figure(
        # Short: a longer title is cut at a phone's width.
        f"{METRICS[metric].label}: median, IQR, p95",
        # Endpoints overlaid (a model page): one hover lists them all at that time.
        hovermode="x unified",
        xaxis=_window_axis(span, [p.t for h in histories for p in h.series.get(metric, [])]),
        # From zero: a single point would otherwise get a range of ±1 around itself.
        yaxis={**_axis(metric), "rangemode": "tozero"},
    )
    for i, h in enumerate(histories):
        points = h.series.get(metric, [])
        if not points:
            continue
        color = PALETTE[i % len(PALETTE)]
        name = _endpoint_name(h)
        xs = [p.t for p in points]
        group = f"e{h.endpoint.pk}"
        fig["data"].append(
            dict(
                type="scatter",
                x=xs,
                y=[p.p25 for p in points],
                mode="lines",
                line={"width": 0, "color": color},
                hoverinfo="skip",
                showlegend=False,
                legendgroup=group,
                name=f"{name} p25",
            )
        )
        fig["data"].append(
            dict(
                type="scatter",
                x=xs,
                y=[p.p75 for p in points],
                mode="lines",
                line={"width": 0, "color": color},
                fill="tonexty",
                fillcolor=_translucent(color),
                hoverinfo="skip",
                showlegend=False,
                legendgroup=group,
                name=f"{name} p75",
            )
        )
        fig["data"].append(
            dict(
                type="scatter",
                x=xs,
                y=[p.p95 for p in points],
                mode="lines",
                line={"width": 1, "color": color, "dash": "dot"},
                showlegend=False,
                legendgroup=group,
                name=f"{name} p95",
                hovertemplate="p95 %{y:,.1f}<extra></extra>",
            )
        )
        fig["data"].append(
            dict(
                type="scatter",
                x=xs,
                y=[p.p50 for p in points],
                customdata=[[p.p25, p.p75, p.samples] for p in points],
                mode="lines+markers",
                marker={"size": 4},
                line={"color": color, "width": 2},
                name=name,
                legendgroup=group,
                hovertemplate=(
                    "%{x}<br>median %{y:,.1f} (p25 %{customdata[0]:,.1f}, "
                    "p75 %{customdata[1]:,.1f}) · %{customdata[2]} runs<extra>" + name + "</extra>"
                ),
            )
        )
    if not fig["data"]:
        return _empty(fig, "No successful runs in this window.")
    _with_marks(fig, marks)
    return fig


def availability(histories: Sequence[EndpointHistory], span: Span | None = None) -> dict:
    """Success rate per time bucket, one line per endpoint, over the whole window."""
    fig = _figure(
        "Availability (success rate)",
        xaxis=_window_axis(span, [t for h in histories for t, _, _ in h.availability]),
        yaxis=_grid(tickformat=".0%", range=[0, 1.05]),
    )
    for i, h in enumerate(histories):
        if not h.availability:
            continue
        fig["data"].append(
            dict(
                type="scatter",
                x=[t for t, _, _ in h.availability],
                y=[rate for _, rate, _ in h.availability],
                customdata=[n for _, _, n in h.availability],
                mode="lines+markers",
                marker={"size": 4},
                line={"color": PALETTE[i % len(PALETTE)], "shape": "hv"},
                name=_endpoint_name(h),
                hovertemplate="%{x}<br>%{y:.1%} of %{customdata} runs<extra></extra>",
            )
        )
    if not fig["data"]:
        return _empty(fig, "No runs in this window.")
    return fig


# ----------------------------------------------------------------- run timeline


@dataclass(frozen=True)
class TimelineEvent:
    t_ms: float
    channel: str  # a answer, r reasoning, t tool call, o other (not output), d done
    tokens: int


def timeline_events(timeline: dict | None) -> list[TimelineEvent]:
    """Events of a stored timeline; tolerant of missing or ragged arrays (old runs)."""
    if not timeline:
        return []
    times = timeline.get("t_us") or []
    channels = timeline.get("ch") or ""
    tokens = timeline.get("tok") or []
    return [
        TimelineEvent(
            t_ms=t / 1000,
            channel=channels[i] if i < len(channels) else "o",
            tokens=int(tokens[i]) if i < len(tokens) and tokens[i] is not None else 0,
        )
        for i, t in enumerate(times)
    ]


def output_events(events: Sequence[TimelineEvent]) -> list[TimelineEvent]:
    return [e for e in events if e.channel in "art"]


def token_timeline(timeline: dict | None) -> dict:
    """Cumulative output tokens over time since request start, reasoning and answer apart."""
    events = output_events(timeline_events(timeline))
    fig = _figure(
        "Token arrival timeline",
        hovermode="x unified",
        xaxis=_grid(title={"text": "ms since request start"}, rangemode="tozero"),
        # Outside ticks move the y labels left: both axes start at 0, and the two zeros
        # otherwise overlap in the corner.
        yaxis=_grid(
            title={"text": "cumulative output tokens"},
            rangemode="tozero",
            ticks="outside",
            ticklen=8,
            tickcolor="rgba(0,0,0,0)",
        ),
    )
    total = 0
    series: dict[str, tuple[list[float], list[int]]] = {"r": ([], []), "a": ([], [])}
    for e in events:
        total += e.tokens
        xs, ys = series["r" if e.channel == "r" else "a"]
        xs.append(e.t_ms)
        ys.append(total)
    for channel, name, color in (("r", "reasoning", REASONING), ("a", "answer", ANSWER)):
        xs, ys = series[channel]
        if xs:
            fig["data"].append(
                dict(
                    type="scatter",
                    x=xs,
                    y=ys,
                    mode="lines+markers",
                    marker={"size": 3, "color": color},
                    line={"color": color, "width": 2, "shape": "hv"},
                    name=name,
                    hovertemplate="%{x:,.1f} ms · %{y} tokens<extra>" + name + "</extra>",
                )
            )
    if not events:
        return _empty(fig, "No output arrived: the run ended before its first token.")
    if events:
        first = events[0].t_ms
        fig["layout"]["shapes"] = [
            {
                "type": "line",
                "x0": first,
                "x1": first,
                "xref": "x",
                "y0": 0,
                "y1": 1,
                "yref": "paper",
                "line": {"dash": "dot", "color": "#6b7280", "width": 1},
            }
        ]
        fig["layout"]["annotations"] = [
            {
                # Right of the line: on its left it ran into the y axis and lost its start
                # ("t token 223 ms"), the first token being near the left edge.
                "x": first,
                "xref": "x",
                "y": 1,
                "yref": "paper",
                "text": f"first token {first:,.0f} ms",
                "showarrow": False,
                "xanchor": "left",
                "yanchor": "top",
                "xshift": 3,
            }
        ]
    return fig


def event_gaps_ms(timeline: dict | None) -> list[float]:
    events = output_events(timeline_events(timeline))
    return [b.t_ms - a.t_ms for a, b in zip(events, events[1:], strict=False)]


def gap_histogram(timeline: dict | None) -> dict:
    """How long the client waited between consecutive output events."""
    gaps = event_gaps_ms(timeline)
    fig = _figure(
        "Gaps between output events",
        bargap=0.05,
        showlegend=False,
        xaxis=_grid(title={"text": "gap (ms)"}),
        yaxis=_grid(title={"text": "events"}),
    )
    if not gaps:
        return _empty(fig, "Fewer than two output events: no gaps to show.")
    fig["data"].append(
        {"type": "histogram", "x": gaps, "marker": {"color": ANSWER}, "name": "gaps", "nbinsx": 40}
    )
    return fig


# ----------------------------------------------------------------- sparklines


@dataclass(frozen=True)
class Sparkline:
    points: str  # SVG polyline points
    width: int
    height: int
    last: float | None

    def __bool__(self) -> bool:
        return bool(self.points)


@dataclass(frozen=True)
class SparkScale:
    """One scale for every sparkline of a board: output speed from 0 to the board's
    highest point, time from its first point to its last. A steady provider is a flat
    line at its own level and a slowdown falls to its share of the height; each line on
    its own range drew two hourly points of a steady provider as a full-height diagonal."""

    high: float
    start: datetime
    end: datetime

    @property
    def label(self) -> str:
        return f"0–{self.high:,.0f} tok/s"


def spark_scale(lines: Iterable[Sequence[Point]]) -> SparkScale | None:
    known = [p for points in lines for p in points if p.value is not None]
    if not known:
        return None
    return SparkScale(
        high=max(p.value for p in known) or 1.0,
        start=min(p.t for p in known),
        end=max(p.t for p in known),
    )


def sparkline(
    points: Sequence[Point], scale: SparkScale | None = None, width: int = 90, height: int = 26
) -> Sparkline:
    """An SVG polyline of median output speed over the window, on the board's scale (its
    own points' when none is given)."""
    known = [(p.t, p.value) for p in points if p.value is not None]
    if len(known) < 2:
        return Sparkline("", width, height, known[-1][1] if known else None)
    scale = scale or spark_scale([points])
    span = (scale.end - scale.start).total_seconds() or 1
    pad = 2

    def xy(t: datetime, v: float) -> str:
        x = pad + (t - scale.start).total_seconds() / span * (width - 2 * pad)
        y = height - pad - v / scale.high * (height - 2 * pad)
        return f"{x:.1f},{y:.1f}"

    return Sparkline(" ".join(xy(t, v) for t, v in known), width, height, known[-1][1])


def _translucent(hex_color: str, alpha: float = 0.18) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"
