"""Charts of a history page share one time axis, and the uptime bars cover their buckets
(issue 34 item 4). Before, each chart started a little before its own first point (the
availability line, the bars and the latency charts each somewhere else), and a bar stood
mid-bucket as wide as plotly guessed: at 1 h, one hairline."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from probes.platform.timefloors import floor_hour
from tests.browser_page import CHROMIUM, chromium_page
from tests.dashboard.web.conftest import make_run


def failing_then_ok(catalog) -> int:
    """Cerebras: 5xx from 50 to 31 minutes ago, then ok runs: the availability data start
    20 minutes before the first latency point."""
    fast, workload = catalog["endpoints"]["fast"], catalog["workload"]
    for minute in range(50, 0, -1):
        status = "server_error" if minute > 30 else "ok"
        make_run(fast, workload, ago=timedelta(minutes=minute), status=status)
    return fast.pk


def figures(context) -> dict[str, dict]:
    out = dict(context["history_charts"])
    out["availability"] = context["availability_chart"]
    out["uptime-by-cause"] = context["cause_chart"]
    return out


@pytest.mark.django_db
def test_every_chart_of_the_endpoint_page_draws_one_time_axis(client, catalog):
    pk = failing_then_ok(catalog)
    context = client.get(f"/endpoints/{pk}/?window=24h").context
    charts = figures(context)
    ranges = {name: tuple(fig["layout"]["xaxis"]["range"]) for name, fig in charts.items()}
    assert len(set(ranges.values())) == 1, ranges
    # From a little before the earliest point of any chart: the first failing run, where
    # the first hour's bar starts.
    (start, _end), *_ = ranges.values()
    first_run = timezone.now() - timedelta(minutes=50)
    assert (first_run - timedelta(minutes=4)).isoformat() < start < first_run.isoformat()


@pytest.mark.django_db
def test_the_uptime_bars_cover_their_hours_from_their_start(client, catalog):
    pk = failing_then_ok(catalog)
    now = timezone.now()
    bars = client.get(f"/endpoints/{pk}/?window=24h").context["cause_chart"]["data"]
    first_run = now - timedelta(minutes=50)
    hours = sorted({floor_hour(now - timedelta(minutes=m)) for m in range(1, 51)})
    for bar in bars:
        # From each hour's start (the first one's from the first run) to its end or now.
        starts = [datetime.fromisoformat(x) for x in bar["x"]]
        assert starts[1:] == hours[1:]
        assert abs((starts[0] - first_run).total_seconds()) < 5
        ends = [
            start + timedelta(milliseconds=ms)
            for start, ms in zip(starts, bar["width"], strict=True)
        ]
        assert ends[:-1] == hours[1:] and abs((ends[-1] - now).total_seconds()) < 5
        assert bar["offset"] == 0
    by_cause = {bar["name"]: sum(bar["y"]) for bar in bars}
    assert sum(by_cause.values()) == 50


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_the_charts_line_up_and_the_bars_fill_their_hours_in_a_browser(live_server, catalog):
    pk = failing_then_ok(catalog)
    with chromium_page(1366) as page:
        page.goto(f"{live_server.url}/endpoints/{pk}/?window=24h")
        page.locator("#uptime-by-cause .main-svg").first.wait_for()
        page.locator("#availability .main-svg").first.wait_for()
        ranges = page.eval_on_selector_all(
            ".js-plotly-plot", "els => els.map(e => e._fullLayout.xaxis.range.join(' '))"
        )
        plot_width = page.evaluate("document.getElementById('uptime-by-cause')._fullLayout._size.w")
        bar_widths = page.eval_on_selector_all(
            "#uptime-by-cause .trace.bars .point path",
            "els => els.map(e => e.getBBox().width)",
        )
    assert len(ranges) >= 3 and len(set(ranges)) == 1, ranges
    # The hours' bars fill the axis from the first hour's start to now (a bar per hour and
    # cause; the stacked causes of an hour share its width).
    assert max(bar_widths) > 0.3 * plot_width
