"""The pages through Django's test client: content, HTMX swaps, empty states, errors."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from probes.models import Probe, Provider

from .conftest import make_run, make_workload


def test_the_leaderboard_shows_one_row_per_endpoint_with_its_medians(client, history):
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('<tr data-endpoint="') == 4
    assert "claimed 2,100 · measured 1," in html
    assert '<span class="badge sim"' in html


def test_every_column_header_links_to_its_definition(client, history):
    html = client.get("/").content.decode()
    methodology = client.get("/methodology/").content.decode()
    for metric in (
        "output_tps",
        "ttft_ms",
        "ttfat_ms",
        "e2e_ms",
        "blended_price",
        "success_rate",
        "samples",
        "last_run",
        "claim",
    ):
        assert f'href="/methodology/#{metric}"' in html
        assert f'id="{metric}"' in methodology


def test_an_htmx_request_gets_only_the_table_and_the_out_of_band_chart_data(client, history):
    response = client.get("/?sort=ttft_ms", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert "<html" not in html
    assert 'id="leaderboard"' in html
    assert 'id="sort-input" hx-swap-oob="true"' in html
    assert 'id="leaderboard-chart-data" hidden hx-swap-oob="true"' in html
    assert response["Vary"] and "HX-Request" in response["Vary"]


def test_a_history_restore_gets_the_whole_page(client, history):
    response = client.get(
        "/?sort=ttft_ms", headers={"HX-Request": "true", "HX-History-Restore-Request": "true"}
    )
    assert "<html" in response.content.decode()


def test_the_table_refreshes_itself_with_the_current_filters(client, history):
    html = client.get("/?window=24h&sort=ttft_ms").content.decode()
    assert 'hx-trigger="every 30s"' in html
    assert (
        'hx-get="/?model=all&amp;workload=chat-short&amp;window=24h&amp;region=all&amp;sort=ttft_ms"'
        in html
    )


@pytest.mark.parametrize("url", ["/?window=3h", "/?model=nope", "/?sort=price", "/?region=x"])
def test_a_bad_filter_answers_400_with_a_message(client, history, url):
    response = client.get(url)
    assert response.status_code == 400
    assert "Use one of:" in response.content.decode()


def test_an_empty_catalog_says_how_to_start(client, db):
    html = client.get("/").content.decode()
    assert "No endpoints yet" in html
    assert "/admin/" in html


def test_endpoints_without_probes_say_to_add_probes(client, catalog):
    Probe.objects.all().delete()
    assert "Nothing is probed yet" in client.get("/").content.decode()


def test_catalog_providers_without_a_key_are_not_listed_and_the_page_says_how_to_enable_them(
    client, catalog
):
    Provider.objects.update(enabled=False)
    html = client.get("/?window=1h").content.decode()
    assert "Nothing is probed yet" in html
    assert "/admin/probes/provider/" in html
    assert '<tr data-endpoint="' not in html


def test_probes_without_runs_in_the_window_say_so(client, catalog):
    html = client.get("/?window=1h").content.decode()
    assert "No runs in this window" in html
    assert html.count('<tr data-endpoint="') == 4  # probed endpoints still listed


def test_a_workload_no_probe_runs_says_to_add_a_probe_not_to_check_workers(client, catalog):
    unprobed = make_workload("reasoning", "Reasoning")
    html = client.get(f"/?workload={unprobed.slug}").content.decode()
    assert 'id="workload-not-probed"' in html and "No runs in this window" not in html
    assert "/admin/probes/probe/add/" in html
    probed = client.get("/?window=1h").content.decode()  # the catalog's workload is probed
    assert "workload-not-probed" not in probed and "No runs in this window" in probed


def test_a_model_whose_endpoints_need_keys_says_so_not_to_pick_a_longer_window(client, catalog):
    oss = catalog["models"]["oss"]  # served only by a provider with no key yet
    html = client.get(f"/models/{oss.slug}/").content.decode()
    assert 'id="why-not-measured"' in html and "needs a key" in html
    assert "longer window" not in html and "workers" not in html
    endpoint = catalog["endpoints"]["oss"]
    html = client.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert 'id="why-not-measured"' in html and "longer window" not in html
    # A measurable endpoint without runs in the window still gets the window advice.
    sim = catalog["endpoints"]["sim"]
    html = client.get(f"/endpoints/{sim.pk}/?window=1h").content.decode()
    assert "why-not-measured" not in html and "longer window" in html


def test_the_endpoint_page_has_history_charts_breakdown_and_recent_runs(client, history):
    endpoint = history["endpoints"]["fast"]
    response = client.get(f"/endpoints/{endpoint.pk}/?window=72h")
    assert response.status_code == 200
    html = response.content.decode()
    figure = json.loads(_json_script(html, "history-output_tps-data"))
    # p25, then p75 filling down to it (the band), the p95 line, the median.
    lines = [t for t in figure["data"] if t["name"] != "events"]  # not the alert/config marks
    assert [t["name"].endswith("p25") for t in lines] == [True, False, False, False]
    assert figure["data"][1]["fill"] == "tonexty"  # the p25–p75 band
    assert "server_error" in html
    newest = history["runs"][0]  # the first endpoint's newest run
    assert newest.endpoint_id == endpoint.pk
    assert f'href="/runs/{newest.pk}/"' in html
    assert "claimed 2,100" in html


def test_history_pages_accept_windows_up_to_90_days_and_refuse_others(client, history):
    endpoint = history["endpoints"]["fast"]
    assert client.get(f"/endpoints/{endpoint.pk}/?window=90d").status_code == 200
    assert client.get(f"/endpoints/{endpoint.pk}/?window=1y").status_code == 400
    assert client.get("/models/llama-33-70b/?workload=zzz").status_code == 400


def test_model_and_provider_pages_list_their_endpoints(client, history):
    model_html = client.get("/models/llama-33-70b/").content.decode()
    # Each endpoint once: a row of the per-endpoint table, linking to its page.
    assert model_html.count("<tr data-endpoint=") == 3
    assert model_html.count('<li><a href="/endpoints/') == 0  # no second list of them
    provider_html = client.get("/providers/demo-sim/").content.decode()
    assert "simulated" in provider_html
    assert client.get("/providers/nobody/").status_code == 404


def test_the_run_page_shows_the_timeline_timings_and_the_error(client, history, workload):
    run = next(r for r in history["runs"] if r.timeline)
    html = client.get(f"/runs/{run.pk}/").content.decode()
    figure = json.loads(_json_script(html, "run-timeline-data"))
    assert [t["name"] for t in figure["data"]] == ["reasoning", "answer"]
    assert figure["data"][1]["y"][-1] == sum(run.timeline["tok"])
    assert "Client-measured vs provider-reported" in html

    failed = make_run(
        history["endpoints"]["mid"],
        workload,
        ago=timedelta(minutes=1),
        status="rate_limited",
        reason="rate_limited",
        retry_after_s=12.0,
    )
    html = client.get(f"/runs/{failed.pk}/").content.decode()
    assert "rate_limited" in html and "12.0 s" in html
    assert "the server asked us to slow down" in html  # our reason, not their words
    assert "Service unavailable" not in html  # the engine's error text is for staff
    assert "No token timeline was stored" in html
    client.force_login(User.objects.create_user("ops", password="pw", is_staff=True))
    assert "Service unavailable" in client.get(f"/runs/{failed.pk}/").content.decode()


def test_every_page_requires_login_when_the_setting_says_so(client, history, settings):
    settings.REQUIRE_LOGIN = True
    for url in ["/", "/methodology/", "/api/v1/leaderboard", f"/runs/{history['runs'][0].pk}/"]:
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert client.get("/metrics").status_code == 401  # a bearer token or a login


def test_pages_never_show_api_keys(client, history, monkeypatch):
    provider = history["endpoints"]["fast"].provider
    provider.set_api_key("sk-very-secret-key-123")
    provider.api_key_env = "CEREBRAS_KEY"
    provider.save()
    monkeypatch.setenv("CEREBRAS_KEY", "csk-env-secret-456")
    endpoint = history["endpoints"]["fast"]
    urls = [
        "/",
        f"/endpoints/{endpoint.pk}/",
        "/providers/cerebras/",
        "/api/v1/catalog",
        "/api/v1/runs",
        "/api/v1/leaderboard.csv",
        "/api/v1/openapi.json",
        "/metrics",
    ]
    for url in urls:
        body = client.get(url).content.decode()
        for secret in (
            "sk-very-secret-key-123",
            "csk-env-secret-456",
            provider.api_key_encrypted,
            "cerebras.example",
        ):
            assert secret not in body, (url, secret)


def _json_script(html: str, element_id: str) -> str:
    start = html.index(f'<script id="{element_id}" type="application/json">')
    start = html.index(">", start) + 1
    return html[start : html.index("</script>", start)]


def test_the_endpoint_page_shows_its_active_alerts(client, catalog):
    from django.utils import timezone

    from dashboard.alerts.models import AlertEvent

    endpoint = catalog["endpoints"]["fast"]
    AlertEvent.objects.create(
        rule_name="TTFT regression",
        condition_label="30-minute median 50 % above the 24-hour baseline",
        metric="ttft_ms",
        endpoint=endpoint,
        workload=catalog["workload"],
        region="eu-west",
        started_at=timezone.now(),
        recent_value=900.0,
        recent_samples=6,
        limit_value=450.0,
    )
    html = client.get(f"/endpoints/{endpoint.pk}/").content.decode()
    assert 'id="endpoint-alerts"' in html and "TTFT regression" in html
    other = client.get(f"/endpoints/{catalog['endpoints']['mid'].pk}/").content.decode()
    assert "TTFT regression" not in other
