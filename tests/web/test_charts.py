"""Figures are valid plotly (checked by plotly's own validators) and show the right data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from dashboard import charts, queries

from .conftest import make_timeline


def valid(figure: dict) -> go.Figure:
    return go.Figure(figure)  # raises on any unknown or ill-typed property


def test_every_figure_is_valid_plotly(history):
    board = queries.leaderboard(queries.parse_filters({}))
    histories = queries.history(list(history["endpoints"].values()), window="7d")
    figures = [
        charts.speed_vs_price(board.rows),
        charts.ttft_vs_speed(board.rows),
        charts.availability(histories),
        *(charts.history(histories, m) for m in ("output_tps", "ttft_ms", "e2e_ms")),
        charts.token_timeline(make_timeline()),
        charts.gap_histogram(make_timeline()),
    ]
    for figure in figures:
        assert valid(figure).data, figure["layout"]["title"]


def test_simulated_endpoints_are_drawn_hollow_and_named_as_such(history):
    board = queries.leaderboard(queries.parse_filters({}))
    (trace,) = charts.ttft_vs_speed(board.rows)["data"]
    simulated = [i for i, name in enumerate(trace["customdata"]) if "(simulated)" in name]
    assert len(simulated) == 1
    assert trace["marker"]["symbol"][simulated[0]] == "circle-open"
    assert "(sim)" in trace["text"][simulated[0]]  # the point's own label says so too
    assert sum("(sim)" in label for label in trace["text"]) == 1


def test_the_timeline_counts_tokens_cumulatively_and_splits_reasoning_from_answer():
    timeline = {"t_us": [1000, 2000, 3000, 5000, 6000], "ch": "orrad", "tok": [0, 2, 3, 4, 0]}
    reasoning, answer = charts.token_timeline(timeline)["data"]
    assert (reasoning["x"], reasoning["y"]) == ([2.0, 3.0], [2, 5])
    assert (answer["x"], answer["y"]) == ([5.0], [9])
    assert charts.event_gaps_ms(timeline) == [1.0, 2.0]


def test_a_ragged_or_missing_timeline_draws_what_it_can():
    assert charts.timeline_events(None) == []
    events = charts.timeline_events({"t_us": [1000, 2000], "ch": "a", "tok": []})
    assert [(e.channel, e.tokens) for e in events] == [("a", 0), ("o", 0)]


def test_a_sparkline_scales_to_its_own_range():
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    points = [queries.Point(t0 + timedelta(hours=i), v) for i, v in enumerate([10, None, 30, 20])]
    line = charts.sparkline(points, width=100, height=20)
    xs_ys = [tuple(map(float, p.split(","))) for p in line.points.split()]
    assert xs_ys[0] == (2.0, 18.0)  # lowest value at the bottom left
    assert xs_ys[1] == pytest.approx((2 + 96 * 2 / 3, 2.0))  # highest at the top
    assert line.last == 20
    assert not charts.sparkline(points[:1])  # one point draws nothing
