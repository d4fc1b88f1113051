"""Pages right from the first run: the default workload, history filters, small fixes."""

from __future__ import annotations

from datetime import timedelta

from dashboard.queries import filters as query_filters
from probes.models import Probe, Workload

from .conftest import make_run, make_workload


def test_the_home_workload_is_a_setting_not_what_most_probes_run(client, catalog, settings):
    short = make_workload("short", "Short prompt")
    for endpoint in catalog["endpoints"].values():
        Probe.objects.create(endpoint=endpoint, workload=short, region="us-east")
        Probe.objects.create(endpoint=endpoint, workload=short, region="ap-south")
    make_workload("standard-1k", "Standard, ~1,000 in / 1,000 out")

    assert query_filters.default_workload() == "standard-1k"  # though most probes run "short"
    settings.DEFAULT_WORKLOAD = "chat-short"
    assert query_filters.default_workload() == "chat-short"
    assert "<strong>Short chat</strong>" in client.get("/").content.decode()


def test_history_pages_default_to_the_home_workload_and_filter_recent_runs(
    client, catalog, settings
):
    endpoint = catalog["endpoints"]["fast"]
    other = make_workload("other", "Other")
    make_run(endpoint, catalog["workload"], ago=timedelta(minutes=5), output_tps=111.0)
    make_run(endpoint, other, ago=timedelta(minutes=1), output_tps=999.0)
    settings.DEFAULT_WORKLOAD = catalog["workload"].slug

    page = client.get(f"/endpoints/{endpoint.pk}/")
    assert page.context["filters"].workload == catalog["workload"]
    assert [r.workload.slug for r in page.context["runs"]] == ["chat-short"]

    everything = client.get(f"/endpoints/{endpoint.pk}/?workload=all")
    assert everything.context["filters"].workload is None
    assert len(everything.context["runs"]) == 2
    assert [
        r.workload for r in client.get(f"/endpoints/{endpoint.pk}/?workload=other").context["runs"]
    ] == [other]
    assert Workload.objects.count() == 2


def test_the_favicon_is_served_and_linked(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")
    assert client.get(response["Location"]).status_code == 200
    assert 'rel="icon"' in client.get("/").content.decode()


def test_the_model_page_shows_each_endpoint_not_one_pooled_median(client, history):
    page = client.get("/models/llama-33-70b/?window=7d&workload=all")
    text = page.content.decode()
    assert 'id="per-endpoint"' in text and 'class="totals"' not in text
    rows = {
        h.endpoint.model_id: h.totals.percentile("output_tps", 50)
        for h in page.context["histories"]
    }
    assert len(rows) == 3 and max(rows.values()) > 4 * min(rows.values())  # not one figure
    for endpoint_id, median in rows.items():
        assert endpoint_id in text and f"{median:,.0f}" in text
