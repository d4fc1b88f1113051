"""Every page holds its layout at a laptop's 1,400 px and a phone's 390 px (issue 18 item 6).

One browser for the module, every page visited in one test per data set, at both widths:
no two chart labels overlap and none is cut at a chart's edge, no plotly toolbar over a
title, no table cell overflows its column, tables fit 1,400 px without scrolling, the page
never scrolls sideways, and the main table's first row is above the fold on a phone.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, AlertRule
from dashboard.queries import aggregates
from probes.models import ProbeRun
from probes.platform.redis_client import redis_client
from probes.scheduling import heartbeat
from tests.dashboard.web import test_browser
from tests.dashboard.web.conftest import build_history
from tests.dashboard.web.layout import layout_problems
from tests.dashboard.web.test_browser import screenshot

# The browser tests' fixtures: one Chromium for the module, a page that fails the test on
# a console error, a Content-Security-Policy violation or a request leaving the machine.
browser = test_browser.browser
page = test_browser.page

pytestmark = [
    pytest.mark.browser,
]

WIDTHS = {"laptop": (1400, 900), "phone": (390, 844)}


def visit_all(page, pages: list[tuple[str, str | None]], name: str) -> list[str]:
    """Each (path, first row selector) at both widths; every problem, named by page."""
    problems = []
    for width_name, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        for path, first_row in pages:
            page.goto(page.base + path)
            found = layout_problems(
                page, first_row if width_name == "phone" else None, fit=width_name == "laptop"
            )
            problems += [f"{path} at {width} px: {p}" for p in found]
            slug = path.strip("/").replace("/", "-").replace("?", "-") or "home"
            screenshot(page, f"layout-{name}-{width_name}-{slug}", full_page=False)
    return problems


def alert_events(catalog) -> list[AlertEvent]:
    """One alert of each kind on the fastest endpoint: threshold, regression, error
    rate and freshness."""
    now = timezone.now()
    common = {
        "endpoint": catalog["endpoints"]["fast"],
        "workload": catalog["workload"],
        "region": "eu-west",
        "recent_samples": 9,
        "window_start": now - timedelta(hours=2),
        "started_at": now - timedelta(hours=1),
        "fired_at": now - timedelta(minutes=55),
    }
    kinds = [
        ("TTFT over 2 s", "ttft_ms", "threshold", {"threshold": 2000}, 2500.0, 2000.0),
        ("Speed regression", "output_tps", "regression", {"regression_pct": 30}, 900.0, 1300.0),
        ("Errors", "error_rate", "threshold", {"threshold": 0.05}, 0.083, 0.05),
        ("Stale", "minutes_since_ok", "threshold", {"threshold": 30}, 45.0, 30.0),
    ]
    events = []
    for name, metric, condition, extra, recent, limit in kinds:
        rule = AlertRule.objects.create(name=name, metric=metric, condition=condition, **extra)
        events.append(
            AlertEvent.objects.create(
                rule=rule,
                rule_name=name,
                condition_label=rule.condition_label,
                metric=metric,
                recent_value=recent,
                limit_value=limit,
                baseline_value=1870.0 if condition == "regression" else None,
                **common,
            )
        )
    return events


def test_every_page_holds_its_layout_on_a_laptop_and_a_phone(page, history):
    events = alert_events(history)
    run = ProbeRun.objects.exclude(timeline=None).first()
    endpoint = history["endpoints"]["fast"]
    pages = [
        ("/", "#leaderboard-table tbody tr"),
        ("/?sort=ttft_ms&window=7d", "#leaderboard-table tbody tr"),
        ("/models/llama-33-70b/", "#per-endpoint tbody tr"),
        ("/providers/groq/", "#per-endpoint tbody tr"),
        (f"/endpoints/{endpoint.pk}/", None),
        (f"/runs/{run.pk}/", None),
        ("/methodology/", None),
        ("/api/", None),
        ("/alerts/", "#active-alerts tbody tr"),
        *[(f"/alerts/{e.pk}/", None) for e in events],
    ]
    problems = visit_all(page, pages, "history")
    # Healthy (200) only with a fresh heartbeat: an unhealthy 503 is a console error.
    redis_client().flushdb()
    heartbeat.record_heartbeat("worker", "local@box")
    heartbeat.record_beat_tick()
    problems += visit_all(page, [("/status", None)], "history")
    assert problems == [], "\n".join(problems)


def test_every_workload_board_and_group_run_holds_its_layout(page, measured):
    """The suite measured for real: each board has its own columns (cached-10k the most)
    and each group its own run page."""
    groups = ProbeRun.objects.filter(role="group").order_by("pk")
    pages = [(f"/?workload={slug}&window=24h", "#leaderboard-table tbody tr") for slug in measured]
    pages += [(f"/runs/{run.pk}/", None) for run in groups]
    problems = visit_all(page, pages, "workloads")
    assert problems == [], "\n".join(problems)


# A day of the clock, from the minute of the hour the axis was first caught at (08:45 UTC).
PINNED_DAY = datetime(2026, 11, 30, 0, 45, tzinfo=UTC)
FIGURE = re.compile(r'<script id="([^"]+)" type="application/json">(.*?)</script>', re.S)

# The figures of another hour into the page as it stands, drawn by the page's own
# static/js/charts.js (Plotly.react), once every chart has finished drawing.
REDRAW = """async (figures) => {
  for (const [id, text] of Object.entries(figures)) {
    document.getElementById(id).textContent = text;
  }
  window.inferwatchDrawCharts(document);
  const charts = [...document.querySelectorAll("[data-figure]")];
  await Promise.all(charts.map(el => Promise.all(el._promises || [])));
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
}"""


def test_history_charts_hold_their_layout_at_every_hour_of_a_day(page, catalog):
    """A history chart's x axis ends now, so where its ticks fall moves with the clock: a
    first tick near the left edge once sat on the y axis's "0" at 08:45 only. An open
    alert's chart too.

    The runs are built relative to a pinned instant; the clock of this process (so the
    server's) is then set to each hour of a day and the history pages render their
    charts. The endpoint page has every kind of history chart, the model page one series
    per endpoint with a legend. Each page is opened once per width and that hour's
    figures are drawn into it, as the page draws its own: 24 hours cost 6 page loads."""
    endpoint = catalog["endpoints"]["fast"]
    history = {"history-output_tps-data", "availability-data"}
    charts = {"/models/llama-33-70b/": history, f"/endpoints/{endpoint.pk}/": history}
    hours = [PINNED_DAY + timedelta(hours=h) for h in range(24)]
    figures: dict[tuple[str, datetime], dict[str, str]] = {}
    with time_machine.travel(PINNED_DAY) as clock:
        build_history(catalog, PINNED_DAY)
        # An open alert's chart ends now too (its date labels were once cut at 390 px
        # past midnight); its axis is the same for every kind, so one event stands for all.
        regression = next(e for e in alert_events(catalog) if e.metric == "output_tps")
        charts[f"/alerts/{regression.pk}/"] = {"alert-chart-data"}
        for hour in hours:
            clock.move_to(hour)
            aggregates.clear_memo()  # as a request in a new minute finds it
            for path, ids in charts.items():
                html = Client().get(path).content.decode()
                figures[path, hour] = dict(FIGURE.findall(html))
                assert ids <= figures[path, hour].keys()
        clock.move_to(hours[0])
        problems = []
        for width, height in WIDTHS.values():
            page.set_viewport_size({"width": width, "height": height})
            for path in charts:
                page.goto(page.base + path)
                for hour in hours:
                    page.evaluate(REDRAW, figures[path, hour])
                    problems += [
                        f"{path} at {width} px at {hour:%H:%M} UTC: {p}"
                        for p in layout_problems(page, None, fit=width > 1000)
                    ]
    assert problems == [], "\n".join(problems)
