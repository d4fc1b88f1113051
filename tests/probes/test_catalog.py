"""The seed catalog loads idempotently, keeps the operator's edits, and the demo matches the
simulator's profiles."""

import io
from collections import Counter

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from probes.catalog.loader import load_catalog, load_demo
from probes.catalog.seeds import (
    DEMO_CLAIM_SOURCE,
    DEMO_COSTLY_INTERVAL_S,
    DEMO_INTERVAL_S,
    DEMO_PROVIDERS,
    PROVIDERS,
)
from probes.catalog.workload_suite import WORKLOADS
from probes.models import (
    CanonicalModel,
    CatalogRecord,
    Claim,
    Endpoint,
    Price,
    Probe,
    Provider,
    Workload,
)
from probes.simulator.profiles import BUILTIN

pytestmark = pytest.mark.django_db

TABLES = [Provider, CanonicalModel, Endpoint, Price, Claim, Workload, Probe]


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in TABLES}


def test_loading_twice_changes_nothing_the_second_time():
    load_catalog("local")
    load_demo("local", "http://127.0.0.1:8765")
    first = counts()
    assert str(load_catalog("local")) == ""
    assert str(load_demo("local", "http://127.0.0.1:8765")) == ""
    assert counts() == first


def test_it_loads_every_seed_provider_disabled_until_a_key_is_set():
    load_catalog("local")
    assert Provider.objects.count() == len(PROVIDERS)
    assert not Provider.objects.filter(enabled=True).exists()
    assert not Probe.objects.active().exists()
    cerebras = Provider.objects.get(slug="cerebras")
    assert (cerebras.base_url, cerebras.api_key_env) == (
        "https://api.cerebras.ai/v1",
        "CEREBRAS_API_KEY",
    )
    assert Provider.objects.get(slug="anthropic").api_style == "anthropic-messages"
    assert not Provider.objects.get(slug="ollama-local").requires_key


def test_it_probes_each_endpoint_with_each_standard_workload_in_the_region():
    load_catalog("eu-west")
    standard = [w.slug for w in WORKLOADS if not w.reasoning]
    endpoints = Endpoint.objects.count()
    # parallel-8 needs 8 concurrent requests: no seed provider allows that by default.
    assert all(p.max_concurrency < 8 for p in Provider.objects.all())
    assert Probe.objects.filter(region="eu-west").count() == endpoints * (len(standard) - 1)
    probed = set(Probe.objects.values_list("workload__slug", flat=True))
    assert probed == set(standard) - {"parallel-8"}
    assert Workload.objects.count() == len(WORKLOADS)  # the reasoning one too, unprobed


def test_it_carries_the_published_cerebras_claims():
    load_catalog("local")
    claims = {
        (c.canonical_model.name, c.metric): c.display_value
        for c in Claim.objects.filter(provider__slug="cerebras")
    }
    assert claims[("Llama 3.3 70B", "output_tps")] == "2,100"
    assert claims[("Llama 3.1 405B", "output_tps")] == "969"
    assert claims[("Llama 3.3 70B", "ttft_ms")] == "65–95"


def test_it_puts_the_same_model_of_different_providers_side_by_side():
    load_catalog("local")
    llama = CanonicalModel.objects.get(name="Llama 3.3 70B")
    providers = set(llama.endpoints.values_list("provider__slug", flat=True))
    assert {"cerebras", "groq", "sambanova", "together-ai", "fireworks-ai"} <= providers


def test_reloading_keeps_what_the_operator_changed():
    load_catalog("local")
    groq = Provider.objects.get(slug="groq")
    groq.enabled = True
    groq.base_url = "https://proxy.internal/groq/v1"
    groq.save()
    Probe.objects.filter(endpoint__provider=groq).update(interval_s=60)
    load_catalog("local")
    groq.refresh_from_db()
    assert groq.enabled and groq.base_url == "https://proxy.internal/groq/v1"
    assert set(
        Probe.objects.filter(endpoint__provider=groq).values_list("interval_s", flat=True)
    ) == {60}


def test_a_key_saved_in_the_admin_starts_probing_a_seed_provider(admin_client):
    load_catalog("local")
    groq = Provider.objects.get(slug="groq")
    form = {
        "name": groq.name, "slug": groq.slug, "api_style": groq.api_style,
        "base_url": groq.base_url, "api_key_env": groq.api_key_env, "api_key": "gsk_test_key",
        "requires_key": "on", "extra_headers": "{}", "max_concurrency": "2",
        "connect_timeout_s": "10", "first_token_timeout_s": "60", "stall_timeout_s": "30",
        "total_timeout_s": "300", "website": groq.website, "notes": groq.notes,
        "endpoints-TOTAL_FORMS": "0", "endpoints-INITIAL_FORMS": "0",
    }  # fmt: skip
    response = admin_client.post(f"/admin/probes/provider/{groq.pk}/change/", form)
    assert response.status_code == 302
    active = Probe.objects.active()
    assert active.exists()
    assert set(active.values_list("endpoint__provider__slug", flat=True)) == {"groq"}


def test_the_demo_providers_are_simulated_enabled_and_use_the_simulators_profiles():
    report = load_demo("local", "http://127.0.0.1:9999/")
    assert "4 new providers" in str(report)
    demo = Provider.objects.filter(simulated=True)
    assert demo.count() == len(DEMO_PROVIDERS)
    for provider in demo:
        assert provider.enabled and provider.probeable
        assert provider.base_url == "http://127.0.0.1:9999/v1"
        assert str(provider).endswith("(simulated)")
        for endpoint in provider.endpoints.all():
            assert endpoint.model_id in BUILTIN, f"{endpoint.model_id} is not a simulator profile"
    intervals = set(Probe.objects.active().values_list("interval_s", flat=True))
    assert intervals == {DEMO_INTERVAL_S, DEMO_COSTLY_INTERVAL_S}
    # The demo takes 8 concurrent requests: parallel-8 runs there.
    assert Probe.objects.filter(workload__slug="parallel-8").count() == len(DEMO_PROVIDERS)


def test_the_demo_has_the_seeds_speed_profiles_under_names_marked_simulated():
    load_demo("local", "http://127.0.0.1:9999/")
    shown = {
        str(e.provider): (e.model_id, BUILTIN[e.model_id].tps)
        for e in Endpoint.objects.filter(provider__simulated=True).select_related("provider")
    }
    assert shown == {
        "Wafer-scale (simulated)": ("sim-blazing", 2100),
        "LPU (simulated)": ("sim-fast", 400),
        "GPU cloud (simulated)": ("sim-gpu", 120),
        "Flaky (simulated)": ("sim-flaky", 200),
    }
    assert BUILTIN["sim-flaky"].error_rate > 0


def test_the_demo_sits_on_the_same_model_as_the_real_providers():
    load_catalog("local")
    load_demo("local", "http://127.0.0.1:9999")
    llama = CanonicalModel.objects.get(name="Llama 3.3 70B")
    simulated = set(llama.endpoints.values_list("provider__simulated", flat=True))
    assert simulated == {True, False}
    assert llama.endpoints.filter(provider__simulated=True).count() == len(DEMO_PROVIDERS)


def test_each_demo_endpoint_claims_its_profiles_speed():
    load_demo("local", "http://127.0.0.1:9999")
    claims = {
        c.endpoint.model_id: (c.metric, c.value, c.source_title)
        for c in Claim.objects.filter(endpoint__provider__simulated=True)
    }
    assert claims["sim-blazing"] == ("output_tps", 2100, DEMO_CLAIM_SOURCE)
    assert claims["sim-fast"] == ("output_tps", 400, DEMO_CLAIM_SOURCE)
    assert len(claims) == len(DEMO_PROVIDERS)


def test_reloading_renames_an_older_demo_provider_instead_of_adding_one():
    load_demo("local", "http://127.0.0.1:9999")
    Provider.objects.filter(slug="lpu-demo").update(name="LPU demo", notes="old")
    Claim.objects.filter(endpoint__model_id="sim-fast").update(value=500)
    load_demo("local", "http://127.0.0.1:9999")
    lpu = Provider.objects.get(slug="lpu-demo")
    assert (lpu.name, Provider.objects.filter(simulated=True).count()) == ("LPU", 4)
    assert "~400 tok/s" in lpu.notes
    assert Claim.objects.get(endpoint__model_id="sim-fast").value == 400


def test_the_demo_follows_the_simulator_when_it_moves():
    load_demo("local", "http://127.0.0.1:8765")
    load_demo("local", "http://127.0.0.1:9000")
    urls = set(Provider.objects.filter(simulated=True).values_list("base_url", flat=True))
    assert urls == {"http://127.0.0.1:9000/v1"}


def test_the_command_reports_what_it_loaded_then_that_it_is_up_to_date():
    out = io.StringIO()
    call_command("load_catalog", "--demo", stdout=out)
    assert "new providers" in out.getvalue()
    out = io.StringIO()
    call_command("load_catalog", "--demo", stdout=out)
    assert out.getvalue().count("up to date") == 2


def test_the_command_refuses_a_malformed_region():
    with pytest.raises(CommandError, match="--region 'EU West'"):
        call_command("load_catalog", "--region", "EU West")


def test_a_newer_seed_price_is_added_to_the_history_not_written_over(monkeypatch):
    from datetime import date

    from probes.catalog import loader

    load_catalog("local")
    endpoint = Endpoint.objects.get(provider__slug="cerebras", model_id="llama-3.3-70b")
    old_price = endpoint.current_price
    monkeypatch.setattr(loader, "CATALOG_AS_OF", date(2030, 1, 1))
    load_catalog("local")
    assert endpoint.prices.count() == 2
    assert endpoint.price_at(date(2029, 12, 31)) == old_price
    assert endpoint.price_at(date(2030, 1, 1)).effective_from == date(2030, 1, 1)


def test_a_reload_never_re_creates_what_the_operator_renamed_or_deleted():
    load_catalog("local")
    template = Endpoint.objects.get(provider__slug="llamacpp-local")
    template.model_id = "qwen2.5-0.5b-instruct"  # the user's tiny server
    template.save()
    Provider.objects.get(slug="ollama-local").delete()
    Probe.objects.filter(endpoint__provider__slug="groq", workload__slug="long-10k").delete()
    Price.objects.filter(endpoint__provider__slug="openai").delete()
    before = counts()

    out = io.StringIO()
    call_command("load_catalog", stdout=out)

    assert counts() == before
    assert not Endpoint.objects.filter(model_id="llama-3.1-8b-instruct").exists()
    assert Endpoint.objects.get(provider__slug="llamacpp-local").catalog_key == (
        "endpoint:llamacpp-local/llama-3.1-8b-instruct"
    )
    text = out.getvalue()
    assert "up to date" in text and "skipped" in text
    assert "provider:ollama-local" in text and "probe:groq/" in text


def test_a_reload_adds_what_it_never_added_before():
    load_catalog("local")
    Probe.objects.filter(region="local").delete()  # deleted: stays deleted
    report = load_catalog("eu-west")  # a new region was never added: it is
    assert Probe.objects.filter(region="eu-west").count() > 0
    assert not Probe.objects.filter(region="local").exists()
    assert "new probes" in str(report)


def test_rows_from_before_catalog_keys_are_adopted_not_duplicated():
    load_catalog("local")
    Provider.objects.update(catalog_key="")
    Endpoint.objects.update(catalog_key="")
    Probe.objects.update(catalog_key="")
    CatalogRecord.objects.all().delete()
    before = counts()
    assert str(load_catalog("local")) == ""
    assert counts() == before
    assert not Provider.objects.filter(catalog_key="").exists()


def test_the_demos_first_runs_spread_over_their_intervals_not_all_at_once():
    before = timezone.now()
    load_demo("local", "http://127.0.0.1:9999")
    probes = Probe.objects.filter(endpoint__provider__simulated=True)
    offsets = [((p.next_run_at - before).total_seconds(), p.interval_s) for p in probes]
    assert len(offsets) >= 40
    # Each starts within its first interval (the planner's phase, probes/scheduling/planner.py).
    assert all(-1 < s < every + 6 for s, every in offsets)
    # Forty probes due in the same second would queue past their slots: at most a few share one.
    assert max(Counter(int(s) for s, _ in offsets).values()) <= 4


def test_demo_prices_discount_cached_input_so_the_cache_saves_money_too():
    load_demo("local", "http://127.0.0.1:9999")
    for price in Price.objects.filter(endpoint__provider__simulated=True):
        assert price.cached_input_per_m == price.input_per_m / 2
