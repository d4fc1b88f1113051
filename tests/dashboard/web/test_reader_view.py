"""Issue 18, the reader's view: each board ranks by its workload's headline and numbers
only rows that can rank, its charts show its rows, tails and uptime by cause reach the
API, and pages answer 304 to a conditional GET while the data is unchanged."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import plotly.graph_objects as go
import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from dashboard import charts, rollups, uptime_charts
from dashboard.queries import filters as query_filters
from dashboard.queries import history as endpoint_history
from dashboard.queries import leaderboard as leaderboards
from probes.models import Claim, ProbeRun

from .conftest import make_batches, make_run


def board(**params) -> leaderboards.Leaderboard:
    return leaderboards.leaderboard(query_filters.parse_filters(params))


@pytest.fixture
def json_board(catalog):
    """A JSON workload: answers too short for a speed, so the board ranks by TTFT. Fast
    and mid answer (mid first), oss only fails, sim never ran."""
    workload = catalog["workload"]
    workload.answer_check = "json_schema"
    workload.save()
    e = catalog["endpoints"]
    for minutes in (5, 15, 25):
        for key, ttft in (("fast", 240.0), ("mid", 120.0)):
            make_run(
                e[key],
                workload,
                ago=timedelta(minutes=minutes),
                ttft_ms=ttft,
                output_tps=None,
                short_output=True,
            )
        make_run(e["oss"], workload, ago=timedelta(minutes=minutes), status="server_error")
    return catalog


def test_a_json_board_ranks_by_ttft_and_numbers_only_the_rows_that_can_rank(json_board):
    e = json_board["endpoints"]
    b = board()
    assert b.filters.sort == "ttft_ms" and b.rank_metric == "ttft_ms"
    assert [(r.endpoint.pk, r.rank) for r in b.rows] == [
        (e["mid"].pk, 1),
        (e["fast"].pk, 2),
        (e["sim"].pk, None),  # unranked rows after the ranked ones, by provider
        (e["oss"].pk, None),
    ]
    reasons = {r.endpoint.pk: r.unranked_reason for r in b.rows if r.rank is None}
    assert reasons == {
        e["sim"].pk: "No runs in this window.",
        e["oss"].pk: "No successful run in this window.",
    }
    # Sorted by another column, the ranked rows still come first and keep their numbers.
    by_price = board(sort="blended_price").rows
    assert [r.rank for r in by_price] == [1, 2, None, None]


def test_the_page_and_api_number_no_unranked_row(client, json_board):
    e = json_board["endpoints"]
    html = client.get(reverse("leaderboard")).content.decode()
    assert html.count('<span class="unranked"') == 2
    assert "Not ranked: No runs in this window." in html
    assert "Not ranked: No successful run in this window." in html
    rows = client.get(reverse("api-leaderboard")).json()["rows"]
    ranks = {row["endpoint_id"]: (row["rank"], row["unranked_reason"]) for row in rows}
    assert ranks[e["mid"].pk] == (1, None)
    assert ranks[e["sim"].pk] == (None, "No runs in this window.")


def test_a_json_boards_charts_show_its_ranked_rows(json_board):
    b = board()
    first = charts.speed_vs_price(b.rows, b.rank_metric)
    second = charts.ttft_vs_speed(b.rows, b.rank_metric)
    go.Figure(first), go.Figure(second)  # valid plotly
    (points,) = first["data"]
    assert sorted(points["y"]) == [120.0, 240.0]  # TTFT of the two priced, answering rows
    assert first["layout"]["title"]["text"] == "TTFT vs blended price"
    (points,) = second["data"]
    assert len(points["x"]) == 2 and second["layout"]["xaxis"]["title"]["text"].startswith(
        "End-to-end"
    )


def test_an_empty_chart_gives_the_true_reason(catalog):
    e = catalog["endpoints"]
    for minutes in (5, 6, 7):  # enough runs to rank; sim has no price
        make_run(e["sim"], catalog["workload"], ago=timedelta(minutes=minutes))
    figure = charts.speed_vs_price(board().rows)
    assert "has a price" in figure["layout"]["annotations"][0]["text"]
    ProbeRun.objects.all().update(output_tps=None, short_output=True)
    make_run(e["fast"], catalog["workload"], ago=timedelta(minutes=4), output_tps=None)
    figure = charts.speed_vs_price(board().rows)
    assert "Output speed median" in figure["layout"]["annotations"][0]["text"]


def test_short_answers_on_a_speed_board_say_why_they_do_not_rank(catalog):
    e = catalog["endpoints"]
    for minutes in (5, 6, 7):  # enough successful runs to rank
        make_run(e["fast"], catalog["workload"], ago=timedelta(minutes=minutes), short_output=True)
        make_run(e["mid"], catalog["workload"], ago=timedelta(minutes=minutes))
    rows = {r.endpoint.pk: r for r in board().rows}
    assert rows[e["mid"].pk].rank == 1
    assert rows[e["fast"].pk].rank is None
    assert rows[e["fast"].pk].unranked_reason == "Answers too short to rank on speed."


def test_p95_columns_sort_and_the_api_carries_p99(client, history):
    b = board(sort="ttft_ms_p95")
    tails = [r.p("ttft_ms", 95) for r in b.rows]
    assert tails == sorted(tails) and None not in tails
    assert 'data-sort-key="ttft_ms_p95"' in client.get(reverse("leaderboard")).content.decode()
    (row, *_) = client.get(reverse("api-leaderboard")).json()["rows"]
    assert row["ttft_ms_p99"] >= row["ttft_ms_p95"] >= row["ttft_ms_p50"]
    text = client.get(reverse("api-leaderboard-csv")).content.decode()
    header = next(csv.reader(io.StringIO(text)))
    assert {"ttft_ms_p99", "e2e_ms_p99", "rank", "availability_server_error"} <= set(header)


def test_availability_by_cause_counts_each_failure_by_its_kind(client, catalog):
    e, workload = catalog["endpoints"], catalog["workload"]
    statuses = ["ok"] * 5 + ["rate_limited"] * 2 + ["server_error", "timeout_stall", "empty"]
    for i, status in enumerate(statuses):
        make_run(e["fast"], workload, ago=timedelta(minutes=5 + i), status=status)
    rows = client.get(reverse("api-leaderboard")).json()["rows"]
    by_cause = {r["endpoint_id"]: r["availability_by_cause"] for r in rows}
    assert by_cause[e["fast"].pk] == {
        "ok": 0.5,
        "rate_limited": 0.2,
        "server_error": 0.1,
        "timeout": 0.1,
        "other": 0.1,
    }
    assert by_cause[e["mid"].pk] is None  # no runs: no shares
    html = client.get(reverse("leaderboard")).content.decode()
    assert html.count('class="cause-strip"') == 1
    assert "rate-limited (429) 20.0 %" in html


def test_the_endpoint_page_stacks_runs_per_hour_by_cause(client, catalog):
    e, workload = catalog["endpoints"]["fast"], catalog["workload"]
    make_run(e, workload, ago=timedelta(minutes=5))
    make_run(e, workload, ago=timedelta(minutes=6), status="rate_limited")
    make_run(e, workload, ago=timedelta(hours=3), status="timeout_total")
    rollups.rebuild()  # the older hours come from rollups
    (h,) = endpoint_history.history([e], window="24h")
    figure = uptime_charts.availability_by_cause([h])
    go.Figure(figure)
    bars = {trace["name"]: sum(trace["y"]) for trace in figure["data"]}
    assert bars == {"ok": 1, "rate-limited (429)": 1, "timeout": 1}
    html = client.get(reverse("endpoint", args=[e.pk]) + "?window=24h").content.decode()
    assert 'id="uptime-by-cause"' in html


@pytest.mark.parametrize("url", ["leaderboard", "api-leaderboard"])
def test_a_conditional_get_answers_304_until_the_data_changes(client, catalog, url):
    e = catalog["endpoints"]["fast"]
    make_run(e, catalog["workload"], ago=timedelta(minutes=5))
    first = client.get(reverse(url))
    assert first.status_code == 200 and first["ETag"] and first["Last-Modified"]
    assert "public" in first["Cache-Control"] and "max-age=60" in first["Cache-Control"]
    again = client.get(reverse(url), headers={"if-none-match": first["ETag"]})
    assert again.status_code == 304 and not again.content
    table = client.get(reverse(url), headers={"hx-request": "true"})  # the 30 s refresh
    assert "no-cache" in table["Cache-Control"] and table["ETag"] != first["ETag"]
    make_run(e, catalog["workload"], ago=timedelta(minutes=1))  # a run lands
    changed = client.get(reverse(url), headers={"if-none-match": first["ETag"]})
    assert changed.status_code == 200 and changed["ETag"] != first["ETag"]


@pytest.mark.django_db(transaction=True)  # each save its own transaction, as in the admin
def test_an_edit_to_the_catalog_changes_the_etag(client, catalog):
    first = client.get(reverse("leaderboard"))
    price = catalog["endpoints"]["fast"].prices.first()
    price.output_per_m *= 2
    price.save()
    again = client.get(reverse("leaderboard"), headers={"if-none-match": first["ETag"]})
    assert again.status_code == 200


def test_signed_in_or_private_pages_are_cached_privately(client, catalog, settings):
    user = User.objects.create_user("reader", password="pw-reader-18")
    client.force_login(user)
    response = client.get(reverse("leaderboard"))
    assert "private" in response["Cache-Control"] and "public" not in response["Cache-Control"]
    settings.REQUIRE_LOGIN = True
    response = client.get(reverse("api-leaderboard"))
    assert "private" in response["Cache-Control"]


def test_a_short_window_draws_one_point_per_run(client, catalog):
    e, workload = catalog["endpoints"]["fast"], catalog["workload"]
    for minutes, speed in ((50, 400.0), (30, 410.0), (10, 420.0)):
        make_run(e, workload, ago=timedelta(minutes=minutes), output_tps=speed)
    make_run(e, workload, ago=timedelta(minutes=20), output_tps=999.0, short_output=True)
    (h,) = endpoint_history.history([e], window="1h")
    assert h.resolution == "run"
    assert [p.p50 for p in h.series["output_tps"]] == [400.0, 410.0, 420.0]  # short: no speed
    assert len(h.series["ttft_ms"]) == 4
    answer = client.get(reverse("api-series"), {"endpoint": e.pk, "window": "1h"}).json()
    assert answer["bucket"] == "run" and len(answer["points"]) == 3
    assert answer["points"][0]["output_tps_p95"] == 400.0


def test_history_pages_default_to_the_leaderboards_window_with_p95_lines(client, history):
    assert query_filters.parse_history_filters({}).window == "72h"
    e = history["endpoints"]["fast"]
    (h,) = endpoint_history.history([e], window="72h")
    figure = charts.history([h], "ttft_ms")
    go.Figure(figure)
    p95 = next(t for t in figure["data"] if t["name"].endswith("p95"))
    p50 = next(t for t in figure["data"] if t["name"] == charts._endpoint_name(h))
    assert all(hi >= mid for hi, mid in zip(p95["y"], p50["y"], strict=True))
    assert figure["layout"]["hovermode"] == "x unified"  # endpoints overlaid, one hover
    html = client.get(reverse("endpoint", args=[e.pk])).content.decode()
    assert '<option value="72h" selected>' in html and '<option value="6h">' in html


def test_a_key_less_endpoint_is_labelled_and_listed_once_apart(client, catalog):
    from probes.models import Endpoint, Provider

    locked = Provider.objects.create(
        name="Keyless Cloud",
        slug="keyless-cloud",
        base_url="https://keyless.example/v1",
        enabled=False,
        requires_key=True,
    )
    idle = Endpoint.objects.create(
        provider=locked, canonical_model=catalog["models"]["llama"], model_id="llama-keyless"
    )
    # Enabled providers without a key that still have runs in the window count as measured.
    for key in ("fast", "mid"):
        make_run(catalog["endpoints"][key], catalog["workload"], ago=timedelta(minutes=5))
    html = client.get(reverse("model", args=[catalog["models"]["llama"].slug])).content.decode()
    assert "3 endpoints serve this model; 1 more in the catalog is not measured" in html
    assert html.count("llama-keyless") == 1 and "needs a key" in html
    assert f'data-endpoint="{idle.pk}"' not in html  # not in the per-endpoint table
    page = client.get(reverse("endpoint", args=[idle.pk])).content.decode()
    assert "Not measured: needs a key." in page


def test_figures_from_our_own_count_carry_the_approx_mark_and_name_the_tokenizer(client, catalog):
    e = catalog["endpoints"]["fast"]
    run = make_run(e, catalog["workload"], ago=timedelta(minutes=5), input_tokens=953)
    ProbeRun.objects.filter(pk=run.pk).update(
        token_source="llama.cpp", prompt_tokens_o200k=900, prompt_seed=7
    )
    html = client.get(reverse("endpoint", args=[e.pk])).content.decode()
    assert 'class="approx"' in html.split('class="totals"')[1].split("</section>")[0]
    page = client.get(reverse("run", args=[run.pk])).content.decode()
    assert "953 by llama.cpp's tokenizer" in page.replace('<span id="input-tokenizer">', "")


def test_a_parallel_board_ranks_and_compares_claims_per_stream(client, catalog):
    """The group row's speed is the batch's aggregate; the board ranks by, and a
    tokens/s claim meets, the median speed of the batch's own requests."""
    workload = catalog["workload"]
    workload.kind, workload.requests = "parallel", 2
    workload.save()
    e = catalog["endpoints"]
    make_batches(e["fast"], workload, (1800.0, 1500.0, 1600.0))  # three: enough to rank
    make_batches(e["mid"], workload, (400.0, 390.0, 380.0))
    b = board()
    assert b.rank_metric == "stream_tps" and b.filters.sort == "-stream_tps"
    rows = {r.endpoint.pk: r for r in b.rows}
    fast = rows[e["fast"].pk]
    assert (fast.rank, fast.stream_tps, fast.output_tps) == (1, 1500.0, 2790.0)
    # The 2,100 tok/s claim about one stream alone is not held against streams run two
    # at once (issue 34 item 5); a claim about this concurrency meets one stream's speed.
    assert fast.claims == []
    Claim.objects.create(
        endpoint=e["fast"], workload=workload, metric="output_tps", value=1600,
        source_title="Two streams at once",
    )  # fmt: skip
    (claim,) = next(r for r in board().rows if r.endpoint.pk == e["fast"].pk).claims
    assert claim.measured == 1500.0  # one stream of the batch, not the 2,790 aggregate
    assert rows[e["mid"].pk].rank == 2
    html = client.get(reverse("leaderboard")).content.decode()
    assert 'data-sort-key="stream_tps"' in html and "claimed 1,600 · measured 1,500" in html
    assert "claimed 2,100" not in html  # the single-stream claim stays off this board
    api_rows = client.get(reverse("api-leaderboard")).json()["rows"]
    assert {r["endpoint_id"]: r["stream_tps_p50"] for r in api_rows}[e["mid"].pk] == 380.0


def test_history_charts_mark_alerts_and_price_changes(client, history):
    from datetime import date
    from decimal import Decimal

    from django.utils import timezone

    from dashboard.alerts.models import AlertEvent
    from probes.models import Price

    e, workload = history["endpoints"]["fast"], history["workload"]
    now = timezone.now()
    AlertEvent.objects.create(
        rule_name="TTFT regression",
        condition_label="ttft_ms > 500",
        metric="ttft_ms",
        endpoint=e,
        workload=workload,
        region="eu-west",
        state="resolved",
        started_at=now - timedelta(hours=30),
        fired_at=now - timedelta(hours=29),
        resolved_at=now - timedelta(hours=20),
        recent_value=700,
        recent_samples=12,
        limit_value=500,
    )
    Price.objects.create(
        endpoint=e,
        effective_from=date.today() - timedelta(days=1),
        input_per_m=Decimal("0.50"),
        output_per_m=Decimal("1.00"),
    )
    response = client.get(reverse("endpoint", args=[e.pk]))
    (_, figure), *_ = response.context["history_charts"]
    go.Figure(figure)
    (events,) = [t for t in figure["data"] if t["name"] == "events"]
    labels = " | ".join(events["text"])
    assert "alert fired: TTFT regression" in labels and "alert resolved" in labels
    assert "new price on llama-3.3-70b: $0.50 in / $1.00 out per M" in labels
    assert len(figure["layout"]["shapes"]) == len(events["x"])
