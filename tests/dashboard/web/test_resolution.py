"""One rule picks every chart's resolution (dashboard/queries/resolution.py): a point per
run while a series has up to MAX_POINTS runs in the window, hourly then daily rollups
beyond, each rollup point inside its samples' span, never before the first run."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboard import rollups
from dashboard.queries import aggregates, resolution
from dashboard.queries import history as endpoint_history
from probes.models import ProbeRun

from .conftest import make_run
from .test_browser import browser, page  # noqa: F401  (the same real Chromium fixtures)

pytestmark = pytest.mark.django_db


def test_the_rule_counts_runs_not_the_window():
    week = timedelta(days=7)
    assert resolution.pick(10, week) == "run"  # a new install's week: ten points
    assert resolution.pick(1000, timedelta(days=90)) == "run"
    assert resolution.pick(1001, week) == "hour"  # 168 hourly points
    assert resolution.pick(1001, timedelta(hours=1000)) == "hour"
    assert resolution.pick(1001, timedelta(days=90)) == "day"  # 2,160 hours would not fit


def _chart(response, metric: str) -> dict:
    return dict(response.context["history_charts"])[f"history-{metric}"]


def test_a_fresh_install_draws_a_point_per_run_in_the_default_window(client, catalog):
    """Ten minutes of runs on the default 72 h window: ten points, at the runs' times,
    the axis starting near the first run (not 72 h before it)."""
    e, workload = catalog["endpoints"]["fast"], catalog["workload"]
    runs = [
        make_run(e, workload, ago=timedelta(minutes=m, seconds=30), ttft_ms=100.0 + m)
        for m in range(10)
    ]
    first = min(r.started_at for r in runs)
    response = client.get(reverse("endpoint", args=[e.pk]))
    figure = _chart(response, "ttft_ms")
    median = next(t for t in figure["data"] if t.get("mode") == "lines+markers")
    assert len(median["x"]) == 10
    assert sorted(median["x"]) == sorted(r.started_at for r in runs)
    axis_start = datetime.fromisoformat(figure["layout"]["xaxis"]["range"][0])
    assert first - timedelta(minutes=3) <= axis_start <= first
    answer = client.get(reverse("api-series"), {"endpoint": e.pk, "metric": "ttft_ms"}).json()
    assert answer["window"] == "72h" and answer["bucket"] == "run"
    assert len(answer["points"]) == 10


def test_rollup_points_stand_inside_their_runs_never_before_the_first(catalog, monkeypatch):
    """Past the limit, daily points: today's point stands between the day's first and
    last run, not at midnight before the install existed; hourly points likewise."""
    e, workload = catalog["endpoints"]["fast"], catalog["workload"]
    monkeypatch.setattr(resolution, "MAX_POINTS", 5)
    now = timezone.now()
    ProbeRun.objects.bulk_create(
        ProbeRun(
            endpoint=e,
            workload=workload,
            region="eu-west",
            started_at=now - timedelta(hours=3, minutes=-m * 5),
            status="ok",
            http_status=200,
            ttft_ms=120.0,
            output_tps=500.0,
            e2e_ms=900.0,
            output_tokens=300,
            token_source="usage",
            methodology_version="1",
        )
        for m in range(30)
    )
    rollups.rebuild()
    aggregates.clear_memo()
    first = now - timedelta(hours=3)
    last = now - timedelta(hours=3) + timedelta(minutes=29 * 5)
    (daily,) = endpoint_history.history([e], window="90d", workload=workload, now=now)
    assert daily.resolution == "day"
    for p in daily.series["ttft_ms"]:
        assert first <= p.t <= last
    (hourly,) = endpoint_history.history([e], window="24h", workload=workload, now=now)
    assert hourly.resolution == "day"  # 24 hourly points exceed a limit of 5 too
    monkeypatch.setattr(resolution, "MAX_POINTS", 25)
    (hourly,) = endpoint_history.history([e], window="24h", workload=workload, now=now)
    assert hourly.resolution == "hour"
    points = hourly.series["ttft_ms"]
    assert 3 <= len(points) <= 4 and sum(p.samples for p in points) == 30
    assert all(first <= p.t <= last for p in points)
    assert all(t >= first for t, _, _ in hourly.availability)


@pytest.mark.browser
def test_a_fresh_install_chart_in_the_browser_draws_every_run(page, catalog):  # noqa: F811
    """Real Chromium: the default-window TTFT chart of ten minutes of runs draws ten
    points, its x axis starting at the first run, not 72 h earlier."""
    e, workload = catalog["endpoints"]["fast"], catalog["workload"]
    runs = [
        make_run(e, workload, ago=timedelta(minutes=m, seconds=30), ttft_ms=100.0 + m)
        for m in range(10)
    ]
    first = min(r.started_at for r in runs)
    page.goto(f"{page.base}/endpoints/{e.pk}/")
    page.wait_for_function("document.getElementById('history-ttft_ms')?.data?.length > 0")
    points = page.evaluate(
        "document.getElementById('history-ttft_ms').data"
        ".filter(t => t.mode === 'lines+markers')[0].x.length"
    )
    start = page.evaluate("document.getElementById('history-ttft_ms').layout.xaxis.range[0]")
    assert points == 10
    # Plotly gives the range back in the page's time zone-less form: UTC wall time.
    drawn = datetime.fromisoformat(str(start).replace(" ", "T")).replace(tzinfo=first.tzinfo)
    assert first - timedelta(minutes=3) <= drawn <= first
