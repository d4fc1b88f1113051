"""The pages in a real headless Chromium (Debian's), against pytest-django's live server.

Every test also checks that the page logged no console error and requested nothing
outside localhost. Screenshots go to test-artifacts/; with INFERWATCH_README_IMAGES=1 the
README's (static/img/readme-*) are refreshed too (never by default: a test run leaves the
work tree as it found it). They come only from the demo: simulated providers measured
for real (tests/dashboard/web/conftest.py's `demo`), never from the factory data, whose
made-up figures carry vendors' names.
"""

from __future__ import annotations

import os
import re
import shutil
from urllib.parse import urlparse

import pytest
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, AlertRule
from probes.models import Claim, ProbeRun
from probes.platform.redis_client import redis_client
from probes.scheduling import heartbeat
from probes.simulator import start_in_process
from tests.conftest import ROOT
from tests.tools import require

ARTIFACTS = ROOT / "test-artifacts"
README_IMAGES = {
    "demo-leaderboard": "readme-leaderboard.png",
    "demo-run": "readme-run.png",
    "add-endpoint": "readme-add-endpoint.png",
    "workload-group": "readme-workloads.png",
}

pytestmark = [
    pytest.mark.browser,
]


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium; every test that uses it is a browser test, marked or not: skipped
    without Chromium on a developer's machine, failed in CI (tests/tools.py)."""
    from playwright.sync_api import sync_playwright

    chromium = require("chromium")

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


# Every Content-Security-Policy violation of every page the context opens, as the browser
# reports it to the page (an inline style or script the policy blocked, an eval).
REPORT_CSP_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", function (e) {
  window.reportCspViolation(e.violatedDirective + " blocked " + (e.blockedURI || "inline")
    + " at " + e.sourceFile + ":" + e.lineNumber);
});
"""


def _check_policy(page, response) -> None:
    is_page = response.request.resource_type == "document" and response.status < 300
    if is_page and "content-security-policy" not in response.headers:
        page.errors.append(f"no Content-Security-Policy on {response.url}")


@pytest.fixture
def page(browser, live_server, transactional_db):
    """A page that records console errors, CSP violations and every host it asks for."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})
    violations: list[str] = []
    context.expose_function("reportCspViolation", lambda text: violations.append(text))
    context.add_init_script(REPORT_CSP_VIOLATIONS)
    page = context.new_page()
    page.errors = []
    page.hosts = set()
    page.on("console", lambda m: m.type == "error" and page.errors.append(m.text))
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("request", lambda r: page.hosts.add(urlparse(r.url).hostname))
    page.on("response", lambda r: _check_policy(page, r))
    page.base = live_server.url
    page.csp_violations = violations
    yield page
    context.close()
    assert violations == [], f"Content-Security-Policy violations: {violations}"
    assert page.errors == [], f"console errors: {page.errors}"
    assert page.hosts <= {"localhost", "127.0.0.1"}, f"requests left localhost: {page.hosts}"


def screenshot(page, name: str, full_page: bool = True) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    if name in README_IMAGES and os.environ.get("INFERWATCH_README_IMAGES") == "1":
        target = ROOT / "static" / "img" / README_IMAGES[name]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)


def trace_count(page, chart_id: str) -> int:
    page.wait_for_selector(f"#{chart_id}.js-plotly-plot .main-svg")
    return page.evaluate(f"document.getElementById('{chart_id}').data.length")


def line_count(page, chart_id: str) -> int:
    """Traces of a history chart besides its marks of alerts and configuration changes."""
    trace_count(page, chart_id)
    return page.evaluate(
        f"document.getElementById('{chart_id}').data.filter(t => t.name !== 'events').length"
    )


def first_endpoint(page) -> str:
    return page.locator("#leaderboard-table tbody tr .endpoint").first.inner_text()


def fits_sideways(page, selector: str) -> bool:
    """Nothing in `selector` sticks out to the right: no hidden column, no sideways scroll."""
    return page.evaluate(
        "s => document.querySelector(s).scrollWidth <= document.querySelector(s).clientWidth + 1",
        selector,
    )


def test_the_leaderboard_loads_with_data_and_draws_its_charts(page, history):
    page.goto(page.base + "/")
    rows = page.locator("#leaderboard-table tbody tr")
    assert rows.count() == 4
    assert first_endpoint(page) == "llama-3.3-70b"  # fastest by median output speed
    assert "claimed 2,100 · measured" in rows.first.inner_text()
    assert page.locator("tr.simulated .badge.sim").count() == 1
    assert trace_count(page, "chart-speed-price") == 1
    assert page.locator("#chart-speed-price .scatterlayer .point").count() == 3  # sim: no price
    assert trace_count(page, "chart-ttft-speed") == 1
    screenshot(page, "leaderboard")


def test_sorting_swaps_only_the_table_and_the_back_button_restores_it(page, history):
    page.goto(page.base + "/")
    page.evaluate("window.__notReloaded = true")
    page.locator("th.col-ttft_ms a.sort").click()
    page.wait_for_url("**sort=ttft_ms**")
    page.wait_for_selector("th.col-ttft_ms.sorted")
    assert first_endpoint(page) == "sim-fast"  # lowest TTFT first
    assert page.evaluate("window.__notReloaded") is True
    assert page.locator("#sort-input").get_attribute("value") == "ttft_ms"

    page.go_back()
    page.wait_for_function("!location.search.includes('ttft_ms')")
    page.wait_for_selector("th.col-output_tps.sorted")
    assert first_endpoint(page) == "llama-3.3-70b"


def test_filtering_by_model_swaps_only_the_table_and_keeps_the_url(page, history):
    page.goto(page.base + "/?sort=ttft_ms")
    page.evaluate("window.__notReloaded = true")
    page.select_option("select[name=model]", "gpt-oss-120b")
    page.wait_for_url("**model=gpt-oss-120b**")
    page.wait_for_function("document.querySelectorAll('#leaderboard-table tbody tr').length === 1")
    assert "sort=ttft_ms" in page.url  # the sort survives a filter change
    assert page.evaluate("window.__notReloaded") is True
    assert first_endpoint(page) == "openai/gpt-oss-120b"
    # The charts follow the table: their data is swapped out of band.
    page.wait_for_function(
        "document.querySelectorAll('#chart-ttft-speed .scatterlayer .point').length === 1"
    )


def test_the_endpoint_page_draws_history_with_bands_and_availability(page, history):
    endpoint = history["endpoints"]["fast"]
    page.goto(f"{page.base}/endpoints/{endpoint.pk}/")
    assert line_count(page, "history-output_tps") == 4  # p25, p75 band, p95, median
    assert line_count(page, "history-ttft_ms") == 4
    assert trace_count(page, "availability") == 1
    assert "server_error" in page.locator("table.breakdown").inner_text()
    screenshot(page, "endpoint")


def test_the_run_page_draws_the_token_timeline_and_gap_histogram(page, history):
    run = next(r for r in history["runs"] if r.timeline)
    page.goto(f"{page.base}/runs/{run.pk}/")
    names = page.evaluate("document.getElementById('run-timeline').data.map(t => t.name)")
    assert names == ["reasoning", "answer"]
    assert trace_count(page, "run-gaps") == 1
    screenshot(page, "run")


def test_model_provider_and_methodology_pages_render(page, history):
    page.goto(page.base + "/models/llama-33-70b/")
    assert line_count(page, "history-output_tps") == 12  # three endpoints × band, p95, median
    screenshot(page, "model")
    page.goto(page.base + "/providers/demo-sim/")
    assert page.locator("h1 .badge.sim").count() == 1
    screenshot(page, "provider")
    page.goto(page.base + "/methodology/#output_tps")
    assert page.locator("dt#output_tps").is_visible()
    screenshot(page, "methodology")


def test_history_filters_send_themselves_without_inline_handlers(page, history):
    endpoint = history["endpoints"]["fast"]
    page.goto(f"{page.base}/endpoints/{endpoint.pk}/")
    with page.expect_navigation():
        page.select_option("form.filters select[name=window]", "24h")
    assert "window=24h" in page.url
    assert line_count(page, "history-output_tps") == 4


def test_status_and_admin_login_pass_the_policy(page, history):
    # A healthy /status answers 200: no queue or mark left in Redis by earlier tests.
    redis_client().flushdb()
    heartbeat.record_heartbeat("worker", "local@box")
    heartbeat.record_beat_tick()
    try:
        page.goto(page.base + "/status")
        state = page.locator("h1 .state")
        assert state.inner_text().lower() == "ok"
        assert state.evaluate("e => getComputedStyle(e).fontWeight") == "600"  # status.css
    finally:
        client = redis_client()
        client.delete(*client.keys(f"{heartbeat.PREFIX}:*"))
    response = page.goto(page.base + "/admin/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    assert page.locator("#id_username").is_visible()
    # Django's admin pages name no icon, so the browser asks for /favicon.ico: not ours.
    page.errors = [e for e in page.errors if "status of 404" not in e]


def test_the_policy_stops_an_injected_inline_script(page, history):
    page.goto(page.base + "/methodology/")
    page.evaluate(
        """() => { const s = document.createElement("script");
        s.textContent = "window.injected = true"; document.body.appendChild(s); }"""
    )
    page.wait_for_function("() => true")
    assert page.evaluate("window.injected === undefined")
    page.wait_for_timeout(200)  # the violation event reaches us through a binding
    assert [v for v in page.csp_violations if v.startswith("script-src")]
    page.csp_violations.clear()
    page.errors.clear()  # Chromium logs the refusal as a console error too


def test_the_leaderboard_is_usable_on_a_phone(page, history):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(page.base + "/")
    page.wait_for_selector("#leaderboard-table")
    # The page itself does not scroll sideways.
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    screenshot(page, "leaderboard-phone")


def test_the_readme_leaderboard_shows_the_simulated_demo_measured_for_real(page, demo):
    page.goto(page.base + "/")
    rows = page.locator("#leaderboard-table tbody tr")
    assert rows.count() == 4
    assert rows.locator(".badge.sim").count() == 4  # every provider marked simulated
    assert page.locator("#leaderboard-table tbody tr:not(.simulated)").count() == 0
    assert first_endpoint(page) == "sim-blazing"
    assert "claimed 2,100 · measured" in rows.first.inner_text()
    # At a laptop's width the whole table shows, claims column included.
    assert fits_sideways(page, "#leaderboard .table-scroll")
    claims = page.locator("#leaderboard-table tbody tr").first.locator("td.claims")
    table_box = page.locator("#leaderboard .table-scroll").bounding_box()
    claims_box = claims.bounding_box()
    assert claims_box["x"] + claims_box["width"] <= table_box["x"] + table_box["width"] + 1
    assert trace_count(page, "chart-speed-price") == 1
    assert page.locator("#chart-speed-price .scatterlayer .point").count() == 4
    screenshot(page, "demo-leaderboard")


def test_the_readme_run_timeline_is_a_real_measured_run(page, demo):
    run = demo["real_runs"]["sim-blazing"]
    assert run.status == "ok" and run.worker == "readme-demo"
    page.goto(f"{page.base}/runs/{run.pk}/")
    assert page.locator("h1 .badge.sim, .badge.sim").count() >= 1
    names = page.evaluate("document.getElementById('run-timeline').data.map(t => t.name)")
    assert names == ["answer"]
    tokens = page.evaluate("Math.max(...document.getElementById('run-timeline').data[0].y)")
    assert tokens == run.output_tokens
    assert trace_count(page, "run-gaps") == 1
    # The README shows the top: timeline, gaps and client vs provider timing.
    screenshot(page, "demo-run", full_page=False)


def test_the_demo_leaderboard_fits_a_phone_without_the_page_scrolling_sideways(page, demo):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(page.base + "/")
    page.wait_for_selector("#leaderboard-table")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    # Nor does the table in its box: each row is a card (test_phone_tables.py).
    box = page.locator("#leaderboard .table-scroll").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390 + 1
    assert fits_sideways(page, "#leaderboard .table-scroll")
    screenshot(page, "demo-leaderboard-phone")
    # Each card starts with which provider it is.
    who = page.locator("#leaderboard-table tbody td.who").first.bounding_box()
    assert box["x"] <= who["x"] <= box["x"] + 16


# -- adding your own server --------------------------------------------------------------

LOCAL_MODEL = "sim-gpu@tps=3000,ttft=20"


@pytest.fixture
def local_server():
    """A llama.cpp-like local server: no usage in the stream, a 2,048-token context, one
    slot, llama.cpp's /tokenize. The simulator in its own process, as a server would be."""
    args = ("--context-tokens", "2048", "--slots", "1", "--no-usage", "--tokenizer", "llama.cpp")
    with start_in_process(*args) as sim:
        yield sim


@pytest.fixture
def staff_page(page, django_user_model):
    django_user_model.objects.create_superuser("op", "op@example.com", "a-long-password")
    page.goto(page.base + "/admin/login/")
    page.fill("#id_username", "op")
    page.fill("#id_password", "a-long-password")
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    return page


def test_a_local_server_goes_from_one_form_to_the_leaderboard(staff_page, local_server):
    page = staff_page
    page.goto(page.base + "/admin/probes/provider/")
    page.click("#add-endpoint-link")
    page.fill("#id_base_url", local_server.base_url)
    page.fill("#id_model_id", LOCAL_MODEL)
    page.fill("#id_provider_name", "My llama box")
    page.fill("#id_model_name", "Llama 3.1 8B")
    page.click("#test-connection")
    report = page.locator("#connection-report")
    report.wait_for()
    assert report.locator(".context").inner_text().startswith("2,048 tokens")
    assert report.locator(".usage").inner_text() == "no"
    assert report.locator(".slots").inner_text() == "1"
    assert report.locator(".token-counter").inner_text() == "llama.cpp"
    assert page.input_value("#id_token_counter") == "llama.cpp"
    assert page.input_value("#id_max_concurrency") == "1"
    assert page.input_value("#id_api_style") == "openai-chat"
    fitting = ["chat-short", "json-schema", "tool-call", "voice-turn"]
    for slug in fitting:
        assert page.is_checked(f"#workload-{slug}"), slug
    for slug in ("standard-1k", "long-10k", "agent-loop"):
        assert page.is_disabled(f"#workload-{slug}")
        assert "not applicable" in page.locator(f"tr[data-workload={slug}]").inner_text()
    # Eight requests at once could never run on a one-slot server.
    assert page.is_disabled("#workload-parallel-8")
    assert (
        "more than the server's slots" in page.locator("tr[data-workload=parallel-8]").inner_text()
    )
    screenshot(page, "add-endpoint")

    page.click("#create-endpoint")
    page.wait_for_selector(".messagelist")
    assert f"4 probe(s): {', '.join(fitting)}" in page.locator(".messagelist").inner_text()

    # Run two single-request probes now from the admin, as an operator would (Run now
    # takes a few rows at a time: each runs while the page waits).
    page.goto(page.base + "/admin/probes/probe/")
    for slug in ("chat-short", "voice-turn"):
        row = page.locator("#result_list tbody tr", has_text=slug)
        row.locator("input.action-select").check()
    page.select_option("select[name=action]", "run_now")
    page.click("button[name=index]")
    page.wait_for_selector(".messagelist")
    run_links = page.locator(".messagelist a")
    assert run_links.count() == 2  # "Run now" links to the runs, not a URL as text

    page.goto(page.base + "/?workload=chat-short")
    row = page.locator("#leaderboard-table tbody tr", has_text=LOCAL_MODEL)
    assert row.locator(".col-samples").inner_text() == "1"
    assert row.locator(".col-success_rate").inner_text().startswith("100")
    # Counted by the server's tokenizer, not usage: the speed is marked.
    assert row.locator(".col-output_tps .approx").inner_text() == "≈"
    row.locator("a.endpoint").click()  # the endpoint's page, on the board's workload
    page.wait_for_selector("table.runs")
    # No usage in the stream: 400 tokens counted by /tokenize, all that max_tokens asked.
    assert "400" in page.locator("table.runs tbody tr").first.inner_text()

    page.goto(page.base + "/?workload=long-10k")
    greyed = page.locator("#leaderboard-table tbody tr.not-applicable")
    assert greyed.count() == 1
    assert "Not applicable" in greyed.inner_text()


# -- small fixes, seen in the browser -----------------------------------------------------


def test_back_after_filtering_restores_the_dropdowns_too(page, history):
    page.goto(page.base + "/")
    page.select_option("select[name=model]", "gpt-oss-120b")
    page.wait_for_url("**model=gpt-oss-120b**")
    page.select_option("select[name=window]", "7d")
    page.wait_for_url("**window=7d**")

    page.go_back()
    page.wait_for_function("!location.search.includes('window=7d')")
    page.wait_for_function("document.querySelector('select[name=window]').value === '72h'")
    assert page.input_value("select[name=model]") == "gpt-oss-120b"
    page.go_back()
    page.wait_for_function("!location.search.includes('model=')")
    page.wait_for_function("document.querySelector('select[name=model]').value === 'all'")
    assert page.input_value("select[name=window]") == "72h"


def test_the_claims_column_names_the_metric_for_people(page, history):
    page.goto(page.base + "/")
    claim = page.locator("#leaderboard-table .claim-metric").first
    assert claim.inner_text() == "Output speed"


def test_the_parallel_board_holds_no_single_stream_claim_against_its_streams(page, measured):
    """A vendor's tokens/s claim about no workload is about one stream alone (issue 34
    item 5): measured for real, the standard board compares it; the parallel board, whose
    streams run two at once, shows no percentage of it and says why."""
    endpoint = measured["parallel-8"].endpoint
    Claim.objects.create(endpoint=endpoint, metric="output_tps", value=2100, source_title="Alone")
    page.goto(page.base + "/?workload=parallel-8")
    cell = page.locator("#leaderboard-table tbody tr td.claims").first
    assert cell.inner_text() == "no claim for 2 at once"
    page.goto(page.base + "/?workload=standard-1k")
    text = page.locator("#leaderboard-table tbody tr td.claims").first.inner_text()
    assert re.fullmatch(r"Output speed claimed 2,100 · measured [\d,]+ · \d+ %", text), text


def test_the_admin_probe_list_shows_every_column_on_a_laptop(staff_page, catalog):
    page = staff_page
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(page.base + "/admin/probes/probe/")
    screenshot(page, "admin-probes-1400", full_page=False)
    last = page.locator("#result_list thead th").last.bounding_box()
    assert last["x"] + last["width"] <= 1400
    assert fits_sideways(page, "#changelist .results")


def test_the_alerts_page_has_the_site_title_and_a_styled_firing_badge(page, catalog):
    rule = AlertRule.objects.create(
        name="TTFT regression", metric="ttft_ms", condition="regression", regression_pct=50
    )
    AlertEvent.objects.create(
        rule=rule, rule_name=rule.name, condition_label=rule.condition_label,
        metric="ttft_ms", endpoint=catalog["endpoints"]["fast"], workload=catalog["workload"],
        region="eu-west", started_at=timezone.now(), recent_value=512.0, recent_samples=9,
        limit_value=301.5,
    )  # fmt: skip
    page.goto(page.base + "/alerts/")
    assert "Inferwatch" in page.title()
    badge = page.locator(".badge.firing").first
    background = badge.evaluate("el => getComputedStyle(el).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent")


def test_the_readme_run_group_shows_a_parallel_run_measured_for_real(page, measured):
    group = ProbeRun.objects.get(probe=measured["parallel-8"], role="group")
    page.goto(f"{page.base}/runs/{group.pk}/")
    assert page.locator("#parallel-summary").is_visible()
    assert page.locator("#group-members tbody tr").count() == 4  # alone, 2 at once, summary
    screenshot(page, "workload-group")
