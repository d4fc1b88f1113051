"""Pages right from the first run: the default workload, history filters, small fixes."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from dashboard.queries import filters as query_filters
from probes.models import Endpoint, Probe, Workload

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


def small_server(catalog) -> Endpoint:
    """A new endpoint on a 2,048-token server (Add an endpoint; a provider without a key
    to wait for): the headline workload does not fit it, so its probes run the short
    chat and a JSON task, never it."""
    endpoint = Endpoint.objects.create(
        provider=catalog["endpoints"]["sim"].provider,
        canonical_model=catalog["models"]["llama"],
        model_id="llama-3.2-1b-q4",
        context_tokens=2048,
    )
    json_task = make_workload("json-schema", "JSON answer")
    json_task.answer_check = "json_schema"
    json_task.save()
    for workload in (catalog["workload"], json_task):
        Probe.objects.create(endpoint=endpoint, workload=workload, region="eu-west")
        make_run(endpoint, workload, ago=timedelta(minutes=3))
    return endpoint


def test_a_new_endpoint_without_the_home_workload_opens_on_what_it_measures(client, catalog):
    """Issue 34 item 8: a new endpoint's page said "No runs in this window … add a probe"
    and "No runs recorded yet" beside its probes and their runs: with no ?workload it
    showed the home workload, which no probe of this endpoint runs."""
    make_workload("standard-1k", "Standard, ~1,000 in / 1,000 out")  # the home workload
    endpoint = small_server(catalog)

    page = client.get(f"/endpoints/{endpoint.pk}/")
    html = page.content.decode()
    # Its output-speed workload, not the JSON one (too short to rank on speed).
    assert page.context["filters"].workload == catalog["workload"]
    assert "No runs in this window" not in html and "add a probe" not in html
    assert "No runs recorded yet" not in html
    assert [r.workload.slug for r in page.context["runs"]] == ["chat-short"]
    # The board's own endpoints still open on the home workload, as the board shows them.
    fast = catalog["endpoints"]["fast"]
    Probe.objects.create(endpoint=fast, workload=Workload.objects.get(slug="standard-1k"))
    page = client.get(f"/endpoints/{fast.pk}/")
    assert page.context["filters"].workload.slug == "standard-1k"


def test_a_probe_that_has_not_run_yet_is_not_asked_for_again(client, catalog):
    """Its probe of the page's workload exists but is not due yet (a new probe's first
    slot is planned across its interval): the page says when it is due, and where its
    runs so far are, instead of asking for a probe."""
    home = make_workload("standard-1k", "Standard, ~1,000 in / 1,000 out")
    endpoint = small_server(catalog)
    due = timezone.now() + timedelta(minutes=4)
    Probe.objects.create(endpoint=endpoint, workload=home, region="eu-west", next_run_at=due)

    page = client.get(f"/endpoints/{endpoint.pk}/")
    html = page.content.decode()
    assert page.context["filters"].workload == home
    assert "add a probe" not in html
    assert f"or wait for its standard-1k probe (next due {due:%H:%M} UTC)." in html
    assert 'href="?workload=chat-short&amp;window=72h&amp;region=all">chat-short</a>' in html
    assert "No runs of standard-1k recorded yet" in html


def test_an_endpoint_without_probes_is_still_asked_for_one(client, catalog):
    make_workload("standard-1k", "Standard, ~1,000 in / 1,000 out")
    endpoint = Endpoint.objects.create(
        provider=catalog["endpoints"]["sim"].provider,
        canonical_model=catalog["models"]["llama"],
        model_id="never-probed",
    )
    html = client.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert "add a probe for it" in html
