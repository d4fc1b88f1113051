"""/api/v1/: field names from metrics.md, cursor pagination, CSV, 400s, OpenAPI."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from dashboard import rollups
from dashboard.queries import aggregates, resolution
from dashboard.web.api import LEADERBOARD_COLUMNS
from probes.models import ProbeRun

from .conftest import make_run


def test_leaderboard_rows_carry_metric_names_with_percentile_suffixes(client, history):
    data = client.get("/api/v1/leaderboard?window=24h").json()
    assert data["filters"]["window"] == "24h"
    row = data["rows"][0]
    for metric in ("output_tps", "ttft_ms", "ttfat_ms", "e2e_ms"):
        for q in (5, 25, 50, 75, 95):
            assert f"{metric}_p{q}" in row
    assert row["provider"] == "cerebras"
    assert row["output_tps_p25"] <= row["output_tps_p50"] <= row["output_tps_p75"]
    assert row["claimed_output_tps"] == 2100
    assert 0 < row["success_rate"] <= 1


def test_the_leaderboard_csv_has_the_same_rows_and_columns(client, history):
    response = client.get("/api/v1/leaderboard.csv?window=24h")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    as_json = client.get("/api/v1/leaderboard?window=24h").json()["rows"]
    assert list(rows[0]) == LEADERBOARD_COLUMNS
    assert [r["endpoint_id"] for r in rows] == [str(r["endpoint_id"]) for r in as_json]
    assert (
        client.get("/api/v1/leaderboard?format=csv").content
        == client.get("/api/v1/leaderboard.csv").content
    )


def test_runs_come_newest_first_and_the_cursor_visits_each_run_once(client, history):
    seen = []
    url = "/api/v1/runs?limit=70&model=llama-33-70b"
    pages = 0
    while url:
        data = client.get(url).json()
        seen += data["runs"]
        url = data["next"]
        pages += 1
    expected = ProbeRun.objects.filter(endpoint__canonical_model__slug="llama-33-70b")
    assert pages == 5  # 288 runs in pages of 70
    assert [r["id"] for r in seen] == list(
        expected.order_by("-started_at", "-id").values_list("id", flat=True)
    )
    assert all(a["started_at"] >= b["started_at"] for a, b in zip(seen, seen[1:], strict=False))


def test_runs_carry_their_status_and_metrics(client, history):
    run = client.get("/api/v1/runs?status=server_error&limit=1").json()["runs"][0]
    assert run["status"] == "server_error"
    assert run["http_status"] == 503
    assert run["output_tps"] is None  # unmeasured is null, never 0
    ok = client.get("/api/v1/runs?status=ok&limit=1").json()["runs"][0]
    assert ok["output_tps"] > 0 and ok["ttft_ms"] > 0 and ok["cost_usd"] == 0.00031


def test_runs_csv_and_time_filters(client, history):
    newest = ProbeRun.objects.order_by("-started_at").first()
    response = client.get(
        "/api/v1/runs.csv", {"since": newest.started_at.isoformat(), "limit": "500"}
    )
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert {int(r["id"]) for r in rows} == set(
        ProbeRun.objects.filter(started_at__gte=newest.started_at).values_list("id", flat=True)
    )


@pytest.mark.parametrize(
    "url, message",
    [
        ("/api/v1/runs?status=exploded", "Unknown status 'exploded'"),
        ("/api/v1/runs?limit=0", "Invalid limit"),
        ("/api/v1/runs?limit=501", "Invalid limit"),
        ("/api/v1/runs?cursor=!!!", "Invalid cursor"),
        ("/api/v1/runs?since=yesterday", "Invalid since"),
        ("/api/v1/runs?endpoint=abc", "Unknown endpoint 'abc'"),
        ("/api/v1/runs?colour=red", "Unknown parameter colour"),
        ("/api/v1/runs?format=xml", "Unknown format 'xml'"),
        ("/api/v1/leaderboard?window=5m", "Unknown window '5m'"),
        ("/api/v1/series?endpoint=999999", "Unknown endpoint '999999'"),
        ("/api/v1/series", "endpoint parameter is required"),
        ("/api/v1/catalog?x=1", "Unknown parameter x"),
    ],
)
def test_bad_parameters_answer_400_with_a_message(client, history, url, message):
    response = client.get(url)
    assert response.status_code == 400
    assert message in response.json()["error"]


def test_an_unknown_series_metric_answers_400(client, history):
    endpoint = history["endpoints"]["fast"]
    response = client.get(f"/api/v1/series?endpoint={endpoint.pk}&metric=joy")
    assert response.status_code == 400
    assert "Unknown metric 'joy'" in response.json()["error"]


def test_series_gives_p25_p50_p75_per_bucket(client, history, monkeypatch):
    endpoint = history["endpoints"]["fast"]
    # More runs in the window than a chart draws one by one (the rule's limit lowered to
    # 30; 30 more runs beside the hourly ones), while its hours fit: hourly rollups.
    monkeypatch.setattr(resolution, "MAX_POINTS", 30)
    for i in range(30):
        make_run(endpoint, history["workload"], ago=timedelta(hours=20, minutes=i * 2))
    rollups.rebuild()
    aggregates.clear_memo()
    data = client.get(f"/api/v1/series?endpoint={endpoint.pk}&metric=ttft_ms&window=24h").json()
    assert data["bucket"] == "hour"
    # One point per hour that has ok runs; the window starts on a whole hour.
    now = timezone.now()
    start = (now - timedelta(hours=24)).replace(minute=0, second=0, microsecond=0)
    runs = ProbeRun.objects.filter(endpoint=endpoint, started_at__gte=start)
    hours_with_ok_runs = {
        r.started_at.replace(minute=0, second=0, microsecond=0) for r in runs if r.status == "ok"
    }
    assert len(data["points"]) == len(hours_with_ok_runs)
    # Each point stands inside its hour's runs, never before the window's first run.
    first = min(r.started_at for r in runs if r.started_at >= now - timedelta(hours=24))
    for point in data["points"]:
        t = datetime.fromisoformat(point["t"])
        assert t >= first
        assert t.replace(minute=0, second=0, microsecond=0) in hours_with_ok_runs
    point = data["points"][0]
    quantiles = {f"ttft_ms_p{q}" for q in (25, 50, 75, 95)}
    assert set(point) == {"t", *quantiles, "samples"}
    availability = client.get(
        f"/api/v1/series.csv?endpoint={endpoint.pk}&metric=success_rate&window=7d"
    ).content.decode()
    assert availability.splitlines()[0] == "t,success_rate,samples"


def test_the_catalog_lists_endpoints_with_current_prices(client, history):
    data = client.get("/api/v1/catalog").json()
    assert {p["slug"]: p["simulated"] for p in data["providers"]} == {
        "cerebras": False,
        "groq": False,
        "demo-sim": True,
    }
    fast = next(e for e in data["endpoints"] if e["model_id"] == "llama-3.3-70b")
    assert fast["blended_price_per_m"] == pytest.approx((3 * 0.85 + 1.20) / 4)
    assert data["regions"] == ["eu-west"]
    assert "base_url" not in str(data)


def test_the_openapi_description_names_every_path_and_metric(client, db):
    spec = client.get("/api/v1/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    assert set(spec["paths"]) == {
        "/api/v1/leaderboard",
        "/api/v1/series",
        "/api/v1/runs",
        "/api/v1/sweeps",
        "/api/v1/catalog",
    }
    row = spec["paths"]["/api/v1/leaderboard"]["get"]["responses"]["200"]["content"][
        "application/json"
    ]["schema"]["properties"]["rows"]["items"]["properties"]
    assert "output_tps_p50" in row and "ttft_ms_p95" in row
    for path in spec["paths"].values():
        assert "400" in path["get"]["responses"]


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/runs?endpoint=99999999999999999999999",
        "/api/v1/runs?since=2025-13-45T00:00:00",
        "/api/v1/runs?cursor=MjAyNS0wMS0wMVQwMDowMDowMCswMDowMHw5OTk5OTk5OTk5OTk5OTk5OTk5OTk5",
        "/api/v1/series?endpoint=1&window=%00",
    ],
)
def test_hostile_values_answer_400_not_500(client, history, url):
    assert client.get(url).status_code == 400


def test_page_ids_out_of_range_answer_404(client, history):
    assert client.get("/runs/99999999999999999999999/").status_code == 404
    assert client.get("/endpoints/99999999999999999999999/").status_code == 404
