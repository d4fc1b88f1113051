"""/alerts/<id>/: the chart with its baseline band and window, the test's figures, the runs
it used; and the badges on leaderboard rows and endpoint pages."""

import io
from urllib.parse import urlparse

import pytest
from django.core.management import call_command
from django.utils import timezone

from dashboard.alerts import evaluator
from dashboard.alerts.detail import event_chart
from dashboard.alerts.models import AlertEvent
from dashboard.alerts.queries import firing_by_endpoint
from probes.models import Probe, ProbeRun, Provider
from tests.tools import require


@pytest.fixture
def fired(runs_until, make_rule):
    runs = runs_until(timezone.now())
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    slow = runs.add(6, minutes_ago=5, ttft_ms=600.0)
    # The per-window test: its p-value is what the page shows (the CUSUM has none).
    evaluator.evaluate_rule(make_rule(test="mann_whitney"), timezone.now())
    return AlertEvent.objects.get(), slow


@pytest.mark.django_db
def test_the_alert_page_shows_the_test_and_links_the_runs_it_used(client, fired):
    event, slow = fired
    html = client.get(f"/alerts/{event.pk}/").content.decode()

    assert "TTFT regression" in html and "firing" in html
    facts = html[html.index('id="alert-facts"') :]
    assert "600 ms (median of 6 runs" in facts and "200 ms (median of 20 runs)" in facts
    assert "+200 % (×3.00 the baseline)" in facts
    assert f"{event.p_value:.2g}" in facts and "Mann–Whitney" in facts
    for run in slow:
        assert f'href="/runs/{run.pk}/"' in html
    baseline_run = ProbeRun.objects.filter(ttft_ms=200.0).first()
    assert f'href="/runs/{baseline_run.pk}/"' not in html


@pytest.mark.django_db
def test_an_unknown_alert_is_a_404(client):
    assert client.get("/alerts/999999/").status_code == 404


@pytest.mark.django_db
def test_leaderboard_rows_and_endpoint_pages_of_firing_series_carry_a_badge(
    client, fired, other_endpoint
):
    event, _ = fired
    assert list(firing_by_endpoint([event.endpoint_id, other_endpoint.pk])) == [event.endpoint_id]
    html = client.get(f"/endpoints/{event.endpoint_id}/").content.decode()
    assert "1 firing" in html and f'href="/alerts/{event.pk}/"' in html
    html = client.get(f"/endpoints/{other_endpoint.pk}/").content.decode()
    assert "firing" not in html
    # The leaderboard lists probed endpoints of enabled providers.
    Probe.objects.create(endpoint=event.endpoint, workload=event.workload, region=event.region)
    Provider.objects.filter(pk=event.endpoint.provider_id).update(enabled=True)
    call_command("rebuild_rollups", stdout=io.StringIO())
    board = client.get("/?window=24h&workload=short-chat").content.decode()
    row = board[board.index(f'data-endpoint="{event.endpoint_id}"') :]
    row = row[: row.index("</tr>")]
    assert "1 firing" in row and f'href="/alerts/{event.pk}/"' in row


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_alert_chart_draws_runs_baseline_band_and_window_in_a_browser(live_server, fired):
    from playwright.sync_api import sync_playwright

    event, _ = fired
    errors, hosts = [], set()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=require("chromium"), args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page()
        page.on("console", lambda m: m.type == "error" and errors.append(m.text))
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: hosts.add(urlparse(r.url).hostname))
        page.goto(f"{live_server.url}/alerts/{event.pk}/")
        page.wait_for_function("document.getElementById('alert-chart')?.data?.length > 0")
        points = page.evaluate("document.getElementById('alert-chart').data[0].y.length")
        shapes = page.evaluate("document.getElementById('alert-chart').layout.shapes.length")
        browser.close()
    assert points == 26  # every usable run of the series around it
    assert shapes == 4  # recent window, change moment, limit, baseline band
    assert errors == [] and hosts <= {"localhost", "127.0.0.1"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    "rule, expected",
    [
        ({"metric": "ttft_ms", "condition": "threshold", "threshold": 500}, [200.0] * 20),
        ({"metric": "error_rate", "condition": "threshold", "threshold": 0.2}, None),
        ({"metric": "minutes_since_ok", "condition": "threshold", "threshold": 30}, None),
    ],
)
def test_every_kind_of_alert_draws_its_series_and_limit(
    client, runs_until, make_rule, rule, expected
):
    """Threshold, error-rate and freshness alerts have a chart as a regression has: the
    series the evaluator read, and the limit it crossed."""
    runs = runs_until(timezone.now())
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    if rule["metric"] == "ttft_ms":
        runs.add(6, minutes_ago=5, ttft_ms=900.0)
        expected = [*expected, *[900.0] * 6]
    else:  # the last 60 minutes fail with 503s
        for minutes in range(60, 0, -5):
            runs.add(1, minutes_ago=minutes, status="server_error")
    evaluator.evaluate_rule(make_rule(name="kind", **rule), timezone.now())
    event = AlertEvent.objects.get()
    html = client.get(f"/alerts/{event.pk}/").content.decode()
    assert 'id="alert-chart"' in html
    chart = event_chart(event)
    ys = chart["data"][0]["y"]
    limits = [s for s in chart["layout"]["shapes"] if s["xref"] == "paper"]
    assert [s["y0"] for s in limits] == [event.limit_value]
    if expected is not None:
        assert ys == expected
    elif rule["metric"] == "error_rate":
        assert max(ys) == 1.0 and min(ys) == 0.0  # 10-minute buckets: all failed, all ok
    else:  # minutes since an ok run climb through the failing hour
        assert ys[-1] >= 55 and ys[0] == 0


@pytest.mark.django_db
def test_the_alert_chart_spans_its_baseline_from_the_first_run(fired):
    """A 24 h baseline whose runs began two hours ago: the axis starts at the first run
    (with a small margin), not 24 h (or a fixed context) before the window."""
    from datetime import datetime, timedelta

    event, slow = fired
    first = ProbeRun.objects.order_by("started_at").first().started_at
    chart = event_chart(event)
    lo, hi = (datetime.fromisoformat(t) for t in chart["layout"]["xaxis"]["range"])
    assert first - timedelta(minutes=5) <= lo <= first
    assert hi >= max(r.started_at for r in slow)
    band = next(s for s in chart["layout"]["shapes"] if s["xref"] == "x" and s["yref"] == "y")
    assert datetime.fromisoformat(band["x0"]) == first  # the baseline band starts with it
