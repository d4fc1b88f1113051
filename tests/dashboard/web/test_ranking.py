"""One ranking rule (dashboard/queries/ranking.py): a row ranks only with at least
RANK_MIN_OK_RUNS successful runs in the window; the others are listed after the ranked
rows with their reason, the same on the board, its charts and the API."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse

from dashboard import charts
from dashboard.queries import filters as query_filters
from dashboard.queries import leaderboard as leaderboards
from probes.engine import left_out

from .conftest import make_run

pytestmark = pytest.mark.django_db


def board(**params) -> leaderboards.Leaderboard:
    return leaderboards.leaderboard(query_filters.parse_filters(params))


@pytest.fixture
def few_runs(catalog):
    """fast: two runs (the fastest, too few); mid: three; oss: three, all failed."""
    e, workload = catalog["endpoints"], catalog["workload"]
    for minutes in (5, 10):
        make_run(e["fast"], workload, ago=timedelta(minutes=minutes), output_tps=2000.0)
    for minutes in (5, 10, 15):
        make_run(e["mid"], workload, ago=timedelta(minutes=minutes), output_tps=300.0)
        make_run(e["oss"], workload, ago=timedelta(minutes=minutes), status="server_error")
    return catalog


TOO_FEW = "Too few runs: 2 successful in this window, 3 needed to rank."


def test_a_row_needs_three_successful_runs_to_rank(few_runs):
    e = few_runs["endpoints"]
    rows = board().rows
    assert [(r.endpoint.pk, r.rank) for r in rows][0] == (e["mid"].pk, 1)
    reasons = {r.endpoint.pk: r.unranked_reason for r in rows if r.rank is None}
    assert reasons == {
        e["fast"].pk: TOO_FEW,
        e["oss"].pk: "No successful run in this window.",
        e["sim"].pk: "No runs in this window.",
    }
    # The fastest figure does not lift an unranked row above a ranked one, in any order.
    for sort in ("-output_tps", "output_tps", "blended_price"):
        assert board(sort=sort).rows[0].endpoint.pk == e["mid"].pk


def test_the_minimum_is_a_setting(few_runs, settings):
    settings.RANK_MIN_OK_RUNS = 2
    e = few_runs["endpoints"]
    ranks = {r.endpoint.pk: r.rank for r in board().rows}
    assert ranks[e["fast"].pk] == 1 and ranks[e["mid"].pk] == 2


def test_page_api_and_charts_take_the_same_rank_and_reason(client, few_runs):
    e = few_runs["endpoints"]
    html = client.get(reverse("leaderboard")).content.decode()
    assert f"Not ranked: {TOO_FEW}" in html
    assert html.count('<span class="unranked"') == 3
    rows = client.get(reverse("api-leaderboard")).json()["rows"]
    ranks = {row["endpoint_id"]: (row["rank"], row["unranked_reason"]) for row in rows}
    assert ranks[e["fast"].pk] == (None, TOO_FEW)
    assert ranks[e["mid"].pk] == (1, None)
    assert [row["endpoint_id"] for row in rows][0] == e["mid"].pk
    figure = charts.speed_vs_price(board().rows)
    (points,) = figure["data"]
    assert points["x"] and points["customdata"] == [charts._label(board().rows[0])]


def test_no_row_ranks_yet_says_why_on_the_chart(catalog):
    e = catalog["endpoints"]
    make_run(e["fast"], catalog["workload"], ago=timedelta(minutes=5))
    figure = charts.speed_vs_price(board().rows)
    assert "No row ranks yet" in figure["layout"]["annotations"][0]["text"]


def test_the_methodology_states_the_minimum(client, settings):
    settings.RANK_MIN_OK_RUNS = 4
    html = client.get(reverse("methodology")).content.decode()
    assert '<strong id="rank-min-ok-runs">4</strong>' in html and "RANK_MIN_OK_RUNS" in html


def test_a_parallel_row_with_failed_batches_does_not_rank_or_claim(client, catalog):
    """Its requests answered (a stream speed exists) but every batch failed: 0 % success
    is not a place, and no measured figure stands beside its claim."""
    workload = catalog["workload"]
    workload.kind, workload.requests = "parallel", 2
    workload.save()
    fast = catalog["endpoints"]["fast"]
    for _ in range(3):
        group = uuid.uuid4()
        for index in (0, 1, 2):
            make_run(
                fast, workload, ago=timedelta(minutes=5), output_tps=200.0, role="step",
                run_group=group, request_index=index,
            )  # fmt: skip
        make_run(
            fast, workload, ago=timedelta(minutes=5), status="server_error", role="group",
            run_group=group, request_index=3,
        )  # fmt: skip
    (row,) = [r for r in board().rows if r.endpoint.pk == fast.pk]
    assert row.stream_tps == 200.0 and row.rank is None
    assert row.unranked_reason == "No successful run in this window."
    assert all(c.measured is None for c in row.claims)
    api = {r["endpoint_id"]: r for r in client.get(reverse("api-leaderboard")).json()["rows"]}
    assert api[fast.pk]["rank"] is None and api[fast.pk]["ok_samples"] == 0


def test_a_claim_stands_only_beside_a_figure_the_board_measures(client, catalog):
    """A JSON board has no speed (answers too short): the 2,100 tok/s claim is not shown
    as "measured —" there; on a speed board it is."""
    workload, fast = catalog["workload"], catalog["endpoints"]["fast"]
    for minutes in (5, 10, 15):
        make_run(fast, workload, ago=timedelta(minutes=minutes), output_tps=None, short_output=True)
    workload.answer_check = "json_schema"
    workload.save()
    (row,) = [r for r in board().rows if r.endpoint.pk == fast.pk]
    assert row.rank == 1 and row.claims == []
    assert "claimed 2,100" not in client.get(reverse("leaderboard")).content.decode()
    workload.answer_check = ""
    workload.save()
    make_run(fast, workload, ago=timedelta(minutes=2), output_tps=1800.0)
    (row,) = [r for r in board().rows if r.endpoint.pk == fast.pk]
    assert [str(c) for c in row.claims] == ["claimed 2,100 · measured 1,800 · 86 %"]


ALL_BOUND = "Every successful run was client-bound (our own measuring loop lagged): none counts."
TWO_BOUND = "Too few runs: 1 counted in this window, 3 needed to rank; left out: 2 client-bound."


@pytest.fixture
def client_bound_runs(catalog):
    """fast: three full-length runs, all flagged client-bound; mid: three, two of them
    flagged; oss: three clean ones, one of them too short for a speed."""
    e, workload = catalog["endpoints"], catalog["workload"]
    for minutes in (5, 10, 15):
        make_run(e["fast"], workload, ago=timedelta(minutes=minutes), client_bound=True)
        make_run(e["mid"], workload, ago=timedelta(minutes=minutes), client_bound=minutes > 5)
        make_run(e["oss"], workload, ago=timedelta(minutes=minutes), short_output=minutes == 5)
    return catalog


def test_an_unranked_rows_reason_is_the_one_that_applied(client, client_bound_runs):
    e = client_bound_runs["endpoints"]
    too_short = "Too few runs: 2 counted in this window, 3 needed to rank; left out: 1 too short."
    expected = {e["fast"].pk: ALL_BOUND, e["mid"].pk: TWO_BOUND, e["oss"].pk: too_short}
    reasons = {r.endpoint.pk: r.unranked_reason for r in board().rows}
    assert {pk: reasons[pk] for pk in expected} == expected
    html = client.get(reverse("leaderboard")).content.decode()
    for reason in expected.values():
        assert f"Not ranked: {reason}" in html
    rows = client.get(reverse("api-leaderboard")).json()["rows"]
    api = {row["endpoint_id"]: row["unranked_reason"] for row in rows}
    assert {pk: api[pk] for pk in expected} == expected


def test_a_client_bound_runs_page_says_why_it_is_left_out(client, client_bound_runs):
    run = client_bound_runs["endpoints"]["fast"].runs.first()
    html = client.get(reverse("run", args=[run.pk])).content.decode()
    flag, why = left_out.LEFT_OUT_WHY["client_bound"]
    assert f'<span class="flag left-out" title="{why}">{flag}</span>' in html
    assert flag in ALL_BOUND  # the board counts in the run page's words
