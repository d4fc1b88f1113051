"""The catalog admin: keys are write-only, bad input is refused with a clear message."""

from decimal import Decimal

import pytest

from probes.models import CanonicalModel, Endpoint, Price, Probe, Provider, Workload

pytestmark = pytest.mark.django_db

KEY = "sk-live-abcdef0123456789"


def provider_form(**overrides) -> dict:
    data = {
        "name": "Acme",
        "slug": "acme",
        "api_style": "openai-chat",
        "base_url": "https://api.acme.example/v1",
        "api_key_env": "",
        "api_key": "",
        "requires_key": "on",
        "extra_headers": "{}",
        "max_concurrency": "2",
        "connect_timeout_s": "10",
        "first_token_timeout_s": "60",
        "stall_timeout_s": "30",
        "total_timeout_s": "300",
        "website": "",
        "notes": "",
        "endpoints-TOTAL_FORMS": "0",
        "endpoints-INITIAL_FORMS": "0",
    }
    data.update(overrides)
    return data


@pytest.fixture
def provider():
    return Provider.objects.create(
        name="Acme", slug="acme", base_url="https://api.acme.example/v1", enabled=False
    )


@pytest.fixture
def endpoint(provider):
    model = CanonicalModel.objects.create(name="Llama 3.3 70B", slug="llama-3-3-70b")
    return Endpoint.objects.create(
        provider=provider, model_id="llama-3.3-70b", canonical_model=model
    )


def test_it_enables_a_provider_when_a_key_is_saved(admin_client, provider):
    response = admin_client.post(
        f"/admin/probes/provider/{provider.pk}/change/", provider_form(api_key=KEY)
    )
    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.enabled
    assert provider.resolve_key().value == KEY
    assert KEY not in provider.api_key_encrypted
    assert provider.probeable


def test_it_keeps_the_stored_key_when_the_field_is_left_empty(admin_client, provider):
    provider.set_api_key(KEY)
    provider.save()
    admin_client.post(
        f"/admin/probes/provider/{provider.pk}/change/", provider_form(notes="renamed")
    )
    provider.refresh_from_db()
    assert provider.notes == "renamed"
    assert provider.resolve_key().value == KEY


def test_it_forgets_the_stored_key_on_request(admin_client, provider):
    provider.set_api_key(KEY)
    provider.save()
    admin_client.post(
        f"/admin/probes/provider/{provider.pk}/change/", provider_form(forget_api_key="on")
    )
    provider.refresh_from_db()
    assert provider.resolve_key().value is None


def test_it_never_renders_a_stored_key_only_its_source(admin_client, provider):
    provider.set_api_key(KEY)
    provider.save()
    page = admin_client.get(f"/admin/probes/provider/{provider.pk}/change/").content.decode()
    listing = admin_client.get("/admin/probes/provider/").content.decode()
    for html in (page, listing):
        assert KEY not in html
        assert provider.api_key_encrypted not in html
        assert "stored, encrypted" in html


def test_it_shows_an_environment_key_as_its_variable_name(admin_client, provider, monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", KEY)
    provider.api_key_env = "ACME_API_KEY"
    provider.save()
    page = admin_client.get(f"/admin/probes/provider/{provider.pk}/change/").content.decode()
    assert "environment (ACME_API_KEY)" in page
    assert KEY not in page


@pytest.mark.parametrize("url", ["api.acme.example/v1", "ftp://acme.example", "https://x/v1?k=1"])
def test_it_rejects_an_invalid_base_url_with_an_example(admin_client, provider, url):
    response = admin_client.post(
        f"/admin/probes/provider/{provider.pk}/change/", provider_form(base_url=url)
    )
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["base_url"]
    assert errors, "the form should have refused the URL"
    provider.refresh_from_db()
    assert provider.base_url == "https://api.acme.example/v1"


def test_it_names_the_full_url_it_expects(admin_client, provider):
    response = admin_client.post(
        f"/admin/probes/provider/{provider.pk}/change/", provider_form(base_url="not a url")
    )
    assert "e.g. https://api.groq.com/openai/v1" in response.content.decode()


def endpoint_form(endpoint, **price) -> dict:
    return {
        "provider": str(endpoint.provider_id),
        "model_id": endpoint.model_id,
        "canonical_model": str(endpoint.canonical_model_id),
        "extra_body": "{}",
        "enabled": "on",
        "notes": "",
        "prices-TOTAL_FORMS": "1",
        "prices-INITIAL_FORMS": "0",
        "prices-0-effective_from": "2025-06-01",
        "prices-0-input_per_m": "0.60",
        "prices-0-cached_input_per_m": "",
        "prices-0-output_per_m": "0.80",
        "prices-0-source_url": "",
        **{f"prices-0-{k}": v for k, v in price.items()},
        "claims-TOTAL_FORMS": "0",
        "claims-INITIAL_FORMS": "0",
    }


def test_it_adds_a_price_to_the_history(admin_client, endpoint):
    response = admin_client.post(
        f"/admin/probes/endpoint/{endpoint.pk}/change/", endpoint_form(endpoint)
    )
    assert response.status_code == 302
    assert endpoint.prices.get().output_per_m == Decimal("0.80")


def test_it_rejects_a_negative_price(admin_client, endpoint):
    response = admin_client.post(
        f"/admin/probes/endpoint/{endpoint.pk}/change/",
        endpoint_form(endpoint, output_per_m="-1"),
    )
    assert response.status_code == 200
    assert "A price cannot be negative." in response.content.decode()
    assert not endpoint.prices.exists()


def test_it_keeps_old_prices_read_only_so_history_is_not_overwritten(admin_client, endpoint):
    Price.objects.create(
        endpoint=endpoint, effective_from="2025-01-01", input_per_m=1, output_per_m=2
    )
    page = admin_client.get(f"/admin/probes/endpoint/{endpoint.pk}/change/").content.decode()
    assert 'name="prices-0-input_per_m"' not in page
    assert 'name="prices-1-input_per_m"' in page  # the empty row for a new price


@pytest.fixture
def probe(endpoint):
    workload = Workload.objects.create(slug="short", name="Short", messages=[])
    return Probe.objects.create(endpoint=endpoint, workload=workload, interval_s=300)


def test_it_rejects_a_zero_interval_on_the_probe_form(admin_client, probe):
    response = admin_client.post(
        f"/admin/probes/probe/{probe.pk}/change/",
        {
            "endpoint": probe.endpoint_id,
            "workload": probe.workload_id,
            "region": "local",
            "interval_s": "0",
            "jitter_s": "0",
            "enabled": "on",
            "next_run_at_0": "2025-06-01",
            "next_run_at_1": "00:00:00",
        },
    )
    assert response.status_code == 200
    assert "The interval must be at least 10 seconds." in response.content.decode()
    probe.refresh_from_db()
    assert probe.interval_s == 300


def test_it_rejects_a_zero_interval_edited_in_the_probe_list(admin_client, probe):
    response = admin_client.post(
        "/admin/probes/probe/",
        {
            "form-TOTAL_FORMS": "1",
            "form-INITIAL_FORMS": "1",
            "form-0-id": str(probe.pk),
            "form-0-interval_s": "0",
            "form-0-enabled": "on",
            "_save": "Save",
        },
    )
    assert response.status_code == 200
    assert "The interval must be at least 10 seconds." in response.content.decode()
    probe.refresh_from_db()
    assert probe.interval_s == 300


def test_it_shows_runs_and_calibrations_read_only(admin_client):
    assert admin_client.get("/admin/probes/proberun/add/").status_code == 403
    assert admin_client.get("/admin/probes/workercalibration/add/").status_code == 403
    assert admin_client.get("/admin/probes/proberun/").status_code == 200


def test_it_refuses_a_new_key_and_forgetting_the_key_at_once(admin_client, provider):
    response = admin_client.post(
        f"/admin/probes/provider/{provider.pk}/change/",
        provider_form(api_key=KEY, forget_api_key="on"),
    )
    assert "Either enter a new key or forget the stored one, not both." in response.content.decode()
    provider.refresh_from_db()
    assert provider.resolve_key().value is None and not provider.enabled
