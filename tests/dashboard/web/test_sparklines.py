"""Leaderboard sparklines on one scale per board, drawn from enough points to show shape
(issue 34 item 2). Before, each line was scaled to its own range from two hourly points on
a fresh install: a steady provider's ±5 % jitter drew a full-height diagonal, as steep as
the provider slowing to a third."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from tests.browser_page import CHROMIUM, chromium_page
from tests.dashboard.web.conftest import make_run

HEIGHT, PAD = 26, 2  # charts.sparkline's defaults: the drawable height is 22 px


def first_hour(catalog) -> None:
    """A fresh install's first hour, one run a minute: Cerebras steady at 1,870 tok/s
    (±5 %), the simulated LPU at 900 tok/s slowing to 300 for the last 15 minutes."""
    rng = random.Random(3)
    endpoints, workload = catalog["endpoints"], catalog["workload"]
    for minute in range(58, 0, -1):
        ago = timedelta(minutes=minute, seconds=10)
        steady = 1870 * rng.uniform(0.95, 1.05)
        make_run(endpoints["fast"], workload, ago=ago, output_tps=steady)
        slowed = 300.0 if minute <= 15 else 900 * rng.uniform(0.95, 1.05)
        make_run(endpoints["sim"], workload, ago=ago, output_tps=slowed)


def ys(polyline: str) -> list[float]:
    return [float(point.split(",")[1]) for point in polyline.split()]


def sparklines(client) -> tuple[dict[int, str], str]:
    response = client.get("/?window=72h")
    context = response.context
    lines = {pk: line.points for pk, line in context["sparklines"].items() if line}
    return lines, response.content.decode()


@pytest.mark.django_db
def test_a_fresh_boards_sparklines_share_one_scale_and_show_shape(client, catalog):
    first_hour(catalog)
    lines, html = sparklines(client)
    fast, sim = catalog["endpoints"]["fast"].pk, catalog["endpoints"]["sim"].pk

    # Enough points for a shape: 5-minute points over the first hour, not two hourly ones.
    assert len(ys(lines[fast])) >= 10 and len(ys(lines[sim])) >= 10
    # One scale: the steady provider's jitter stays within a tenth of the height …
    steady = ys(lines[fast])
    assert max(steady) - min(steady) < 0.1 * (HEIGHT - 2 * PAD)
    # … at the top (it is the board's fastest), and the slowing one falls to a third of
    # its level, below the steady one all along.
    assert min(steady) == pytest.approx(PAD, abs=1.5)
    slowing = ys(lines[sim])
    floor = HEIGHT - PAD
    assert (floor - slowing[-1]) == pytest.approx((floor - slowing[0]) / 3, rel=0.15)
    assert all(s > f for s, f in zip(slowing, steady, strict=False))
    # Labelled: what the lines are and their common scale.
    assert 'id="spark-scale"' in html and "one scale (0–" in html
    assert html.count('data-scale="0–') == 2


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_the_sparklines_share_one_scale_in_a_browser(live_server, catalog):
    first_hour(catalog)
    with chromium_page(1366) as page:
        page.goto(f"{live_server.url}/?window=72h")
        note = page.locator("#spark-scale")
        note_visible = note.is_visible()
        scales = page.eval_on_selector_all("svg.spark", "els => els.map(e => e.dataset.scale)")
        heights = page.eval_on_selector_all(
            "svg.spark polyline",
            "els => els.map(e => { const b = e.getBBox(); return [b.height, "
            "e.points.numberOfItems]; })",
        )
    assert note_visible and len(scales) == 2 and len(set(scales)) == 1
    (steady_height, steady_points), (slowing_height, slowing_points) = sorted(heights)
    assert steady_points >= 10 and slowing_points >= 10
    assert steady_height < 2.5 < 5 < slowing_height  # flat beside a fall
