"""The leaderboard, a run page and /alerts/ read on a phone's 390 px without scrolling
sideways (issue 34 item 7): their tables reflow into stacked rows, each value under its
column's name (a data-label), instead of scrolling inside their boxes.

test_layout.py already holds that the page itself never scrolls sideways; a table that
scrolls inside its own .table-scroll box passed that and still hid most of its columns.
"""

from __future__ import annotations

import pytest

from probes.models import ProbeRun
from tests.dashboard.web import test_browser
from tests.dashboard.web.test_browser import screenshot
from tests.dashboard.web.test_layout import alert_events

browser = test_browser.browser
page = test_browser.page

pytestmark = [pytest.mark.browser]

PHONE = {"width": 390, "height": 844}

# Every table's box and every cell of it: how far each sticks out sideways, and whether a
# stacked cell shows the name of its column.
SIDEWAYS = r"""() => {
  const problems = [];
  const page = document.documentElement;
  if (page.scrollWidth > 390) problems.push("the page is " + page.scrollWidth + " px wide");
  document.querySelectorAll("main table").forEach(table => {
    const name = table.id || table.className;
    const box = table.closest(".table-scroll") || table;
    if (box.scrollWidth > box.clientWidth + 1) {
      problems.push(name + ": scrolls sideways by " + (box.scrollWidth - box.clientWidth) + " px");
    }
    const cut = [...table.querySelectorAll("td, th")].filter(
      cell => cell.getBoundingClientRect().right > window.innerWidth + 1);
    if (cut.length) {
      problems.push(name + ": " + cut.length + " cells end past the screen's edge, the first '"
        + cut[0].textContent.trim().replace(/\s+/g, " ").slice(0, 30) + "'");
    }
  });
  return problems;
}"""


def phone_problems(page, path: str, shot: str) -> list[str]:
    page.goto(page.base + path)
    page.wait_for_function(
        "[...document.querySelectorAll('[data-figure]')]"
        ".every(el => el.classList.contains('js-plotly-plot'))"
    )
    screenshot(page, f"phone-{shot}")
    return [f"{path}: {p}" for p in page.evaluate(SIDEWAYS)]


def test_the_board_a_run_and_alerts_fit_a_phone_without_scrolling_sideways(page, history):
    alert_events(history)
    run = ProbeRun.objects.exclude(timeline=None).filter(status="ok").first()
    page.set_viewport_size(PHONE)
    problems = []
    for path, shot in [("/", "leaderboard"), (f"/runs/{run.pk}/", "run"), ("/alerts/", "alerts")]:
        problems += phone_problems(page, path, shot)
    assert problems == [], "\n".join(problems)


def test_a_stacked_value_is_named_by_its_column(page, history):
    """With the header row out of the way, each value carries its column's name."""
    alert_events(history)
    page.set_viewport_size(PHONE)
    page.goto(page.base + "/")
    cell = page.locator("#leaderboard-table tbody tr").first.locator("td.col-ttft_ms")
    label = cell.evaluate("td => getComputedStyle(td, '::before').content")
    assert "TTFT" in label or "first token" in label.lower(), label
    page.goto(page.base + "/alerts/")
    cell = page.locator("#active-alerts tbody tr").first.locator("td.alert-values")
    assert "Values" in cell.evaluate("td => getComputedStyle(td, '::before').content")
