"""Client-bound runs are shown, not dropped in silence (issue 34 item 3): the board says how
many of its runs were left out of the medians and why, each row how many were its, the API
gives the count, and the run page says why that run was left out. From raw runs and from
rollups alike."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command

from dashboard.queries import aggregates
from tests.browser_page import CHROMIUM, chromium_page
from tests.dashboard.web.conftest import make_run


def runs_with_some_client_bound(catalog, hours_ago: float) -> list:
    """Cerebras: ten ok runs, three of them measured while our loop was held."""
    fast, workload = catalog["endpoints"]["fast"], catalog["workload"]
    runs = []
    for i in range(10):
        bound = i < 3
        runs.append(
            make_run(
                fast,
                workload,
                ago=timedelta(hours=hours_ago, minutes=i),
                output_tps=100.0 if bound else 1870.0,  # a held loop reads slow
                client_bound=bound,
                loop_lag_first_ms=40.0 if bound else 0.4,
                loop_lag_max_ms=40.0 if bound else 0.6,
            )
        )
    return runs


@pytest.mark.django_db
@pytest.mark.parametrize("hours_ago", [0.2, 5], ids=["raw runs", "rollups"])
def test_the_board_and_the_api_say_how_many_runs_were_left_out_and_why(client, catalog, hours_ago):
    runs_with_some_client_bound(catalog, hours_ago)
    if hours_ago > 1:
        call_command("rebuild_rollups", stdout=io.StringIO())
        aggregates.clear_memo()
    fast = catalog["endpoints"]["fast"].pk

    html = client.get("/?window=24h").content.decode()
    note = html[html.index('id="left-out"') :]
    assert note.startswith('id="left-out">3 of 10 runs in this window are left out')
    assert "our own measuring client may have set their figures" in note
    row = html[html.index(f'data-endpoint="{fast}"') :]
    row = row[: row.index("</tr>")]
    assert "3 left out: client-bound" in row

    [api_row] = [
        r
        for r in client.get("/api/v1/leaderboard?window=24h").json()["rows"]
        if r["endpoint_id"] == fast
    ]
    assert (api_row["samples"], api_row["client_bound_runs"]) == (10, 3)
    # The median is the seven runs that count (rollups hold it within a histogram bucket).
    assert api_row["output_tps_p50"] == pytest.approx(1870, rel=0.012)


@pytest.mark.django_db
def test_the_run_page_says_why_a_run_was_left_out(client, catalog):
    bound, *_ = runs_with_some_client_bound(catalog, 0.2)
    html = client.get(f"/runs/{bound.pk}/").content.decode()
    assert "client-bound: our measuring loop was held up to 40 ms while it read" in html


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1366, 390])
def test_the_left_out_runs_are_visible_on_the_board_in_a_browser(live_server, catalog, width):
    runs_with_some_client_bound(catalog, 0.2)
    with chromium_page(width) as page:
        page.goto(f"{live_server.url}/?window=24h")
        note = page.locator("#left-out")
        seen = note.is_visible() and note.inner_text()
    assert seen and seen.startswith("3 of 10 runs in this window are left out")
