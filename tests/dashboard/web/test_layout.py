"""Every page holds its layout at a laptop's 1,400 px and a phone's 390 px (issue 18 item 6).

One browser for the module, every page visited in one test per data set, at both widths:
no two chart labels overlap and none is cut at a chart's edge, no plotly toolbar over a
title, no table cell overflows its column, tables fit 1,400 px without scrolling, the page
never scrolls sideways, and the main table's first row is above the fold on a phone.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, AlertRule
from probes.models import ProbeRun
from probes.platform.redis_client import redis_client
from probes.scheduling import heartbeat
from tests.dashboard.web import test_browser
from tests.dashboard.web.layout import layout_problems
from tests.dashboard.web.test_browser import CHROMIUM, screenshot

# The browser tests' fixtures: one Chromium for the module, a page that fails the test on
# a console error, a Content-Security-Policy violation or a request leaving the machine.
browser = test_browser.browser
page = test_browser.page

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed"),
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
