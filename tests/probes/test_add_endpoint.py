"""Adding your own server: test it, see what fits, create provider, endpoint and probes.

Against the real simulator acting as a local llama.cpp-like server: no usage in the
stream, a 2,048-token context, one slot, a tokenize route.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from dashboard.queries import filters as query_filters
from dashboard.queries import leaderboard as leaderboards
from probes.catalog.loader import LoadReport, load_workloads
from probes.models import CanonicalModel, Endpoint, Probe, ProbeRun, Provider
from probes.onboarding import connection_check, new_endpoint
from probes.scheduling import dispatch
from probes.simulator import ServerTraits, start_in_process, start_in_thread
from probes.slots import run as runner
from tests.probes.test_admin import provider_form

MODEL = "sim-gpu@tps=3000,ttft=20"
LOCAL = ServerTraits(context_tokens=2048, total_slots=1, usage=False, tokenize=True)


@pytest.fixture(scope="module")
def local_server():
    with start_in_thread(traits=LOCAL) as sim:
        yield sim


@pytest.fixture(scope="module")
def plain_server():
    with start_in_thread() as sim:
        yield sim


def test_the_check_finds_usage_context_slots_and_tokenize_on_a_local_server(local_server):
    report = connection_check.check(local_server.base_url, MODEL)

    assert report.ok and report.api_style == "openai-chat"
    assert report.stream_usage is False
    assert report.context_tokens == 2048 and report.context_source == "/props n_ctx"
    assert report.total_slots == 1 and report.safe_concurrency == 1
    assert report.tokenize_route.endswith("/tokenize")


def test_the_check_of_a_server_that_says_nothing_about_itself(plain_server):
    report = connection_check.check(plain_server.base_url, MODEL)

    assert report.ok and report.stream_usage is True
    assert report.context_tokens is None and report.total_slots is None
    assert report.tokenize_route == "" and report.safe_concurrency == 1


def test_the_check_detects_an_anthropic_only_server():
    with start_in_process("--api", "anthropic-messages") as sim:
        report = connection_check.check(sim.base_url, MODEL)
    assert report.ok and report.api_style == "anthropic-messages"


def test_a_long_prompt_does_not_fit_a_small_context_and_a_short_one_does(db):
    load_workloads(LoadReport())
    fits = {p.workload.slug: p.fits for p in new_endpoint.propose(2048)}
    assert fits == {
        "chat-short": True,
        "standard-1k": False,
        "long-10k": False,
        "cached-10k": False,
        "code-refactor": False,
        "voice-turn": True,
        "agent-loop": False,  # its tenth step carries nine answers: ~4,300 tokens
        "json-schema": True,
        "tool-call": True,
        "parallel-8": True,
    }
    assert all(p.fits for p in new_endpoint.propose(None))  # unknown context: no verdict


def test_a_parallel_workload_wider_than_the_servers_slots_is_not_proposed(db):
    load_workloads(LoadReport())
    one_slot = {p.workload.slug: p for p in new_endpoint.propose(None, slots=1)}
    assert not one_slot["parallel-8"].fits
    assert "8 requests at once" in one_slot["parallel-8"].reason
    # Sequential groups send one request at a time: one slot is enough.
    assert one_slot["agent-loop"].fits and one_slot["cached-10k"].fits
    assert all(p.fits for p in new_endpoint.propose(None, slots=8))
    assert all(p.fits for p in new_endpoint.propose(None, slots=None))  # unknown: no verdict


def form(base_url: str, **extra) -> dict:
    return {
        "api_style": "detect",
        "base_url": base_url,
        "model_id": MODEL,
        "api_key_env": "",
        "api_key": "",
        "provider_name": "",
        "model_name": "",
        "context_tokens": "",
        "max_concurrency": "2",
        "interval_s": "300",
        **extra,
    }


def test_test_connection_then_create_makes_provider_endpoint_and_fitting_probes(
    admin_client, local_server
):
    url = reverse("admin:probes_provider_add_endpoint")
    tested = admin_client.post(url, form(local_server.base_url, action="test"))

    text = tested.content.decode()
    assert tested.status_code == 200
    assert "2,048 tokens (/props n_ctx)" in text
    filled = tested.context["form"].data
    assert filled["api_style"] == "openai-chat" and filled["max_concurrency"] == "1"
    assert filled["context_tokens"] == "2048"
    proposals = {p.workload.slug: p for p in tested.context["proposals"]}
    assert not proposals["long-10k"].fits
    assert 'data-workload="long-10k"' in text and "not applicable" in text

    created = admin_client.post(
        url,
        {**filled.dict(), "action": "create", "workloads": filled.getlist("workloads")},
        follow=True,
    )

    provider = Provider.objects.get()
    assert not provider.requires_key and provider.probeable and provider.max_concurrency == 1
    endpoint = Endpoint.objects.get(provider=provider)
    assert endpoint.context_tokens == 2048
    # parallel-8 fits the context but not the server's one slot: not proposed, not made.
    assert not proposals["parallel-8"].fits
    fitting = ["chat-short", "json-schema", "tool-call", "voice-turn"]
    assert sorted(Probe.objects.values_list("workload__slug", flat=True)) == fitting
    assert "4 probe(s): " in created.content.decode()


def test_create_without_a_test_asks_for_one(admin_client, local_server):
    response = admin_client.post(
        reverse("admin:probes_provider_add_endpoint"),
        form(local_server.base_url, action="create"),
    )
    assert "Test the connection first" in response.content.decode()
    assert not Provider.objects.exists()


def test_deleting_a_created_provider_leaves_no_canonical_model_behind(admin_client, local_server):
    url = reverse("admin:probes_provider_add_endpoint")
    filled = admin_client.post(url, form(local_server.base_url, action="test")).context["form"]
    filled = filled.data
    admin_client.post(url, {**filled.dict(), "action": "create", "workloads": []})
    provider = Provider.objects.get()
    model = provider.endpoints.get().canonical_model
    delete = reverse("admin:probes_provider_delete", args=[provider.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 302
    assert not Provider.objects.exists()
    assert not CanonicalModel.objects.filter(pk=model.pk).exists()


def test_a_model_an_alert_rule_or_another_endpoint_names_stays(db):
    from dashboard.alerts.models import AlertRule

    watched = CanonicalModel.objects.create(name="Watched", slug="watched")
    shared = CanonicalModel.objects.create(name="Shared", slug="shared")
    AlertRule.objects.create(name="w", metric="ttft_ms", threshold=1, canonical_model=watched)
    one = Provider.objects.create(name="One", slug="one", base_url="http://127.0.0.1:9/v1")
    two = Provider.objects.create(name="Two", slug="two", base_url="http://127.0.0.1:8/v1")
    Endpoint.objects.create(provider=one, model_id="a", canonical_model=watched)
    Endpoint.objects.create(provider=one, model_id="b", canonical_model=shared)
    Endpoint.objects.create(provider=two, model_id="b", canonical_model=shared)
    one.delete()
    assert set(CanonicalModel.objects.values_list("slug", flat=True)) == {"watched", "shared"}
    two.delete()
    assert set(CanonicalModel.objects.values_list("slug", flat=True)) == {"watched"}


def test_a_pasted_key_never_comes_back_to_the_page(admin_client, local_server):
    secret = "sk-local-0123456789abcdef"
    response = admin_client.post(
        reverse("admin:probes_provider_add_endpoint"),
        form(local_server.base_url, action="test", api_key=secret),
    )
    assert secret not in response.content.decode()
    filled = response.context["form"].data
    admin_client.post(
        reverse("admin:probes_provider_add_endpoint"),
        {**filled.dict(), "action": "create", "workloads": filled.getlist("workloads")},
    )
    provider = Provider.objects.get()
    assert provider.resolve_key().value == secret and provider.requires_key


def test_the_page_is_for_staff_only(client, local_server):
    response = client.get(reverse("admin:probes_provider_add_endpoint"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.fixture
def small_endpoint(db, local_server):
    workloads = {w.slug: w for w in load_workloads(LoadReport())}
    provider = Provider.objects.create(
        name="Tiny box", slug="tiny-box", base_url=local_server.base_url,
        requires_key=False, enabled=True,
    )  # fmt: skip
    endpoint = Endpoint.objects.create(
        provider=provider,
        model_id=MODEL,
        canonical_model=CanonicalModel.objects.create(name="Small", slug="small"),
        context_tokens=2048,
    )
    probes = {
        slug: Probe.objects.create(endpoint=endpoint, workload=workloads[slug], region="local")
        for slug in ("chat-short", "long-10k")
    }
    return endpoint, probes


def test_a_workload_that_does_not_fit_is_never_dispatched(small_endpoint):
    endpoint, probes = small_endpoint
    assert probes["chat-short"].applicable and not probes["long-10k"].applicable
    assert set(Probe.objects.active()) == {probes["chat-short"]}

    now = datetime.now(UTC) + timedelta(seconds=1)
    sent = dispatch.dispatch_due(lambda slot: None, now, lookahead_s=0)
    assert [s.probe_id for s in sent] == [probes["chat-short"].pk]


def test_the_board_shows_a_workload_that_does_not_fit_as_not_applicable(small_endpoint):
    endpoint, _ = small_endpoint
    board = leaderboards.leaderboard(query_filters.parse_filters({"workload": "long-10k"}))
    (row,) = board.rows
    assert row.endpoint == endpoint and row.not_applicable and row.samples == 0

    board = leaderboards.leaderboard(query_filters.parse_filters({"workload": "chat-short"}))
    (row,) = board.rows
    assert not row.not_applicable


def test_a_disabled_probe_leaves_the_board(small_endpoint, client):
    endpoint, probes = small_endpoint
    runner.run_slot(probes["chat-short"], None, "test", "local")
    Probe.objects.filter(pk=probes["chat-short"].pk).update(enabled=False)
    board = leaderboards.leaderboard(query_filters.parse_filters({"workload": "chat-short"}))
    assert board.rows == []


def test_max_tokens_per_probe_overrides_the_workloads(small_endpoint):
    _, probes = small_endpoint
    probe = probes["chat-short"]
    probe.max_tokens = 70
    probe.save()

    runner.run_slot(Probe.objects.get(pk=probe.pk), None, "test", "local")

    run = ProbeRun.objects.get(probe=probe)
    assert run.status == "ok" and run.output_tokens == 70
    assert run.token_source == "o200k"  # the server sent no usage


def test_a_local_server_added_in_the_provider_form_needs_no_key(admin_client):
    data = provider_form(
        name="Box", slug="box", base_url="http://127.0.0.1:8080/v1", requires_key="on"
    )
    response = admin_client.post(reverse("admin:probes_provider_add"), data)
    assert response.status_code == 302
    assert not Provider.objects.get(slug="box").requires_key


def test_the_provider_form_offers_an_endpoint_row(admin_client):
    response = admin_client.get(reverse("admin:probes_provider_add"))
    assert 'name="endpoints-0-model_id"' in response.content.decode()


def test_a_key_variable_that_is_one_of_inferwatchs_own_settings_is_refused(
    admin_client, local_server
):
    response = admin_client.post(
        reverse("admin:probes_provider_add_endpoint"),
        form(local_server.base_url, action="test", api_key_env="SECRET_KEY"),
    )
    assert "one of Inferwatch&#x27;s own settings" in response.content.decode()
    assert not Provider.objects.exists()


def test_admin_messages_keep_provider_names_as_written(admin_client, local_server):
    provider = Provider.objects.create(
        name="vLLM (local)", slug="vllm-local", base_url=local_server.base_url,
        requires_key=False, enabled=True,
    )  # fmt: skip
    Endpoint.objects.create(
        provider=provider,
        model_id=MODEL,
        canonical_model=CanonicalModel.objects.create(name="Small", slug="small"),
    )
    response = admin_client.post(
        reverse("admin:probes_provider_changelist"),
        {"action": "test_connection", "_selected_action": [provider.pk]},
        follow=True,
    )
    text = response.content.decode()
    assert "vLLM (local) · sim-gpu" in text and "VLLM" not in text


def test_an_endpoint_without_probes_says_so_in_the_admin(admin_client):
    model = CanonicalModel.objects.create(name="Small", slug="small")
    data = provider_form(
        **{
            "endpoints-TOTAL_FORMS": "1",
            "endpoints-0-model_id": "tiny-1b",
            "endpoints-0-canonical_model": str(model.pk),
            "endpoints-0-enabled": "on",
        }
    )
    response = admin_client.post(reverse("admin:probes_provider_add"), data, follow=True)
    assert "tiny-1b has no probes: nothing measures it" in response.content.decode()
    listing = admin_client.get(reverse("admin:probes_endpoint_changelist")).content.decode()
    assert "none: not measured" in listing


def test_the_api_marks_a_workload_that_does_not_fit_as_not_applicable(small_endpoint, client):
    (row,) = client.get("/api/v1/leaderboard?workload=long-10k").json()["rows"]
    assert row["not_applicable"] is True and row["samples"] == 0
    (row,) = client.get("/api/v1/leaderboard?workload=chat-short").json()["rows"]
    assert row["not_applicable"] is False
