"""Issue 18 in the browser: switching to a JSON board re-sorts by its headline (the old
board's speed sort does not carry over), numbers only the rows that rank, and its charts
draw its rows."""

from __future__ import annotations

from datetime import timedelta

import pytest

from probes.models import Probe

from .conftest import make_run, make_workload
from .test_browser import browser, page  # noqa: F401  (the same real Chromium fixtures)


@pytest.mark.browser
def test_a_json_board_ranks_by_ttft_after_a_workload_switch(page, catalog):  # noqa: F811
    e = catalog["endpoints"]
    json_workload = make_workload("facts-json", "Facts as JSON")
    json_workload.answer_check = "json_schema"
    json_workload.save()
    for endpoint in e.values():
        Probe.objects.create(endpoint=endpoint, workload=json_workload, region="eu-west")
        make_run(endpoint, catalog["workload"], ago=timedelta(minutes=5))
    for key, ttft in (("fast", 240.0), ("mid", 120.0)):
        for minutes in (5, 6, 7):  # three successful runs: enough to rank
            make_run(
                e[key], json_workload, ago=timedelta(minutes=minutes), ttft_ms=ttft,
                output_tps=None, short_output=True,
            )  # fmt: skip

    page.goto(page.base + "/?workload=chat-short&sort=-output_tps")
    page.select_option("select[name=workload]", "facts-json")
    page.wait_for_url("**workload=facts-json**")
    page.wait_for_selector("th.col-ttft_ms.sorted")  # the JSON board's own default sort
    assert "sort=-output_tps" not in page.url
    rows = page.locator("#leaderboard-table tbody tr")
    assert rows.count() == 4
    ranks = [rows.nth(i).locator("td.rank").inner_text().strip() for i in range(4)]
    assert ranks == ["1", "2", "–", "–"]
    assert rows.first.locator(".endpoint").inner_text() == "llama-3.3-70b-versatile"
    assert "Not ranked: No runs in this window." in rows.nth(2).inner_text()
    page.wait_for_function(
        "document.querySelectorAll('#chart-speed-price .scatterlayer .point').length === 2"
    )
    title = page.locator("#chart-speed-price .gtitle").text_content()
    assert title == "TTFT vs blended price"
