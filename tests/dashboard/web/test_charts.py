"""Figures are valid plotly (checked by plotly's own validators) and show the right data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from dashboard import charts
from dashboard.queries import filters as query_filters
from dashboard.queries import history as endpoint_history
from dashboard.queries import leaderboard as leaderboards

from .conftest import make_run, make_timeline


def valid(figure: dict) -> go.Figure:
    return go.Figure(figure)  # raises on any unknown or ill-typed property


def test_every_figure_is_valid_plotly(history):
    board = leaderboards.leaderboard(query_filters.parse_filters({}))
    histories = endpoint_history.history(list(history["endpoints"].values()), window="7d")
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
    board = leaderboards.leaderboard(query_filters.parse_filters({}))
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


def test_sparklines_share_the_boards_scale_from_zero():
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    points = [
        leaderboards.Point(t0 + timedelta(hours=i), v) for i, v in enumerate([10, None, 30, 20])
    ]
    other = [leaderboards.Point(t0 + timedelta(hours=i), 40.0) for i in range(4)]
    scale = charts.spark_scale([points, other])
    assert (scale.high, scale.start, scale.end, scale.label) == (
        40.0,
        t0,
        t0 + timedelta(hours=3),
        "0–40 tok/s",
    )
    line = charts.sparkline(points, scale, width=100, height=20)
    xs_ys = [tuple(map(float, p.split(","))) for p in line.points.split()]
    assert xs_ys[0] == (2.0, 18.0 - 16 / 4)  # a quarter of the board's highest
    assert xs_ys[1] == pytest.approx((2 + 96 * 2 / 3, 18.0 - 16 * 3 / 4))
    assert line.last == 20
    flat = charts.sparkline(other, scale, width=100, height=20)
    assert {p.split(",")[1] for p in flat.points.split()} == {"2.0"}  # the top, flat
    assert not charts.sparkline(points[:1], scale)  # one point draws nothing


def test_a_history_shorter_than_its_window_spans_its_data_not_a_point(catalog):
    endpoint = catalog["endpoints"]["fast"]
    make_run(endpoint, catalog["workload"], ago=timedelta(minutes=5), output_tps=1.5)
    histories = endpoint_history.history([endpoint], window="24h")
    now = datetime.now(UTC)
    span = (now - timedelta(hours=24), now)
    figure = valid(charts.history(histories, "output_tps", span))
    start, end = (datetime.fromisoformat(t) for t in figure.layout.xaxis.range)
    assert end == now  # up to now
    # From a little before the data (the run's hourly point), not a day, nor a millisecond.
    (point,) = histories[0].series["output_tps"]
    assert start < point.t and end - start < timedelta(hours=1, minutes=10)
    assert figure.layout.yaxis.rangemode == "tozero"
    assert valid(charts.availability(histories, span)).layout.xaxis.range


def test_charts_with_nothing_to_draw_say_why(catalog):
    board = leaderboards.leaderboard(query_filters.parse_filters({}))  # no runs at all
    for figure, words in (
        (charts.speed_vs_price(board.rows), "No measured runs"),
        (charts.ttft_vs_speed(board.rows), "No measured runs"),
        (charts.token_timeline(None), "before its first token"),
        (charts.gap_histogram(None), "no gaps"),
        (charts.history([], "output_tps"), "No successful runs"),
    ):
        layout = valid(figure).layout
        assert words in layout.annotations[0].text.replace("<br>", " ")  # wrapped for phones
        assert layout.xaxis.visible is False and layout.yaxis.visible is False


def test_scatter_labels_have_room_inside_the_axes(history):
    board = leaderboards.leaderboard(query_filters.parse_filters({}))
    figure = charts.ttft_vs_speed(board.rows)
    (trace,) = figure["data"]
    lo, hi = figure["layout"]["xaxis"]["range"]
    assert lo < min(trace["x"]) and max(trace["x"]) < hi
    lo, hi = figure["layout"]["yaxis"]["range"]
    assert max(trace["y"]) + 0.1 * (max(trace["y"]) - min(trace["y"])) < hi  # room above


def test_scatter_labels_the_users_own_endpoints_before_the_simulators(history):
    """Crowded labels are dropped from the end of the trace (static/js/charts.js): the
    real endpoints come first, whatever their rank, so the one a user added keeps its."""
    from probes.models import Provider

    Provider.objects.exclude(simulated=True).update(simulated=True)
    mid = history["endpoints"]["mid"].provider  # ranks below the others on speed
    Provider.objects.filter(pk=mid.pk).update(simulated=False)
    board = leaderboards.leaderboard(query_filters.parse_filters({}))
    assert board.rows[0].provider.pk != mid.pk
    for figure in (charts.ttft_vs_speed(board.rows), charts.speed_vs_price(board.rows)):
        (trace,) = figure["data"]
        own = [i for i, label in enumerate(trace["customdata"]) if label.startswith("Groq ")]
        assert own and own == list(range(len(own))), trace["customdata"]
        assert all("(sim)" not in trace["text"][i] for i in own)
