"""A leaderboard row whose token counts are not (all) from usage is marked ≈.

Real runs: two endpoints of the simulator (playing a llama.cpp server) probed through
the runner, one streaming usage, one without (counted by its tokenize route). Their
rows are read from raw runs (the window's tail), from rollups and from the window's
snapshot: only the second is marked, on the page and in the API, in all three.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from dashboard import rollups, snapshots
from dashboard.definitions import APPROX_TOKENS
from dashboard.queries import aggregates
from probes.catalog.loader import LoadReport, load_workloads
from probes.models import CanonicalModel, Endpoint, Probe, ProbeRun, Provider, Workload
from probes.simulator import start_in_thread
from tests.counted_runs import run_slot_counted

RUNS = 2
QUERY = {"workload": "chat-short", "window": "24h"}


@pytest.fixture
def two_series(db):
    load_workloads(LoadReport())
    workload = Workload.objects.get(slug="chat-short")
    with start_in_thread(tokenizer="llama.cpp") as sim:
        provider = Provider.objects.create(
            name="Local", slug="local", base_url=sim.base_url, requires_key=False, enabled=True
        )
        model = CanonicalModel.objects.create(name="Small", slug="small")
        with_usage = Endpoint.objects.create(
            provider=provider, model_id="sim-default@tps=4000,ttft=5", canonical_model=model
        )
        without = Endpoint.objects.create(
            provider=provider,
            model_id="sim-default@tps=4000,ttft=5,usage=none",
            canonical_model=model,
            token_counter="llama.cpp",
        )
        slot = datetime.now(UTC).replace(second=0, microsecond=0)
        for endpoint in (with_usage, without):
            probe = Probe.objects.create(endpoint=endpoint, workload=workload, region="local")
            for i in range(RUNS):
                run_slot_counted(probe, slot - timedelta(minutes=i))
    return with_usage, without


def _row_html(page: str, endpoint: Endpoint) -> str:
    match = re.search(rf'<tr data-endpoint="{endpoint.pk}".*?</tr>', page, re.S)
    assert match, f"no row for endpoint {endpoint.pk}"
    return match.group(0)


def _assert_only_the_second_is_marked(client, with_usage: Endpoint, without: Endpoint) -> None:
    aggregates.clear_memo()
    page = client.get(reverse("leaderboard"), QUERY).content.decode()
    assert 'class="approx"' not in _row_html(page, with_usage)
    marked = _row_html(page, without)
    assert f'<span class="approx" title="{APPROX_TOKENS[:40]}' in marked.replace("&#x27;", "'")
    assert "(100.0 % of ok runs)" in marked

    rows = client.get(reverse("api-leaderboard"), QUERY).json()["rows"]
    by_endpoint = {r["endpoint_id"]: r for r in rows}
    assert by_endpoint[with_usage.pk]["approx_tokens"] is False
    assert by_endpoint[with_usage.pk]["approx_tokens_share"] == 0
    assert by_endpoint[without.pk]["approx_tokens"] is True
    assert by_endpoint[without.pk]["approx_tokens_share"] == 1
    assert by_endpoint[without.pk]["ok_samples"] == RUNS


def test_only_the_series_without_usage_is_marked_approx(client, two_series):
    with_usage, without = two_series
    sources = set(ProbeRun.objects.filter(endpoint=without).values_list("token_source", flat=True))
    assert sources == {"llama.cpp"}
    assert not ProbeRun.objects.filter(endpoint=without, input_tokens=None).exists()
    # Fresh runs: the window's raw tail.
    _assert_only_the_second_is_marked(client, with_usage, without)

    # The same runs hours ago: read from rollups, then from the window's snapshot.
    ProbeRun.objects.update(started_at=datetime.now(UTC) - timedelta(hours=5))
    rollups.rebuild()
    _assert_only_the_second_is_marked(client, with_usage, without)
    assert "24h" in snapshots.refresh()
    _assert_only_the_second_is_marked(client, with_usage, without)


def test_the_openapi_description_lists_the_mark(client, db):
    spec = client.get(reverse("api-openapi")).json()
    row = spec["paths"]["/api/v1/leaderboard"]["get"]["responses"]["200"]
    props = row["content"]["application/json"]["schema"]["properties"]["rows"]["items"]
    assert props["properties"]["approx_tokens"]["description"] == APPROX_TOKENS
    assert "approx_tokens_share" in props["properties"]
