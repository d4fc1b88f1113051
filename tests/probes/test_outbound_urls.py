"""Every URL field we send requests to refuses a cloud metadata address in its model's
validation, so the admin, the YAML loader (`load_catalog --file`) and the channel form
all refuse it, with the door's reason (the door refuses it again at every request:
tests/test_door_out.py). The OTLP endpoint setting stops the start."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from dashboard.alerts.models import Channel
from probes.models import CanonicalModel, Endpoint, Provider
from tests.conftest import clean_env, run_python
from tests.probes.test_admin import provider_form

pytestmark = pytest.mark.django_db

METADATA = [
    "http://169.254.169.254/latest",
    "http://[::ffff:169.254.169.254]/latest",
    "http://[64:ff9b::a9fe:a9fe]/latest",  # NAT64
    "http://[::169.254.169.254]/latest",  # IPv4-compatible
    "http://metadata.google.internal/computeMetadata/v1",
    "http://[fd00:ec2::254]/latest",
]


def refusal(call) -> str:
    with pytest.raises(ValidationError) as refused:
        call()
    return " ".join(refused.value.messages)


@pytest.fixture
def provider() -> Provider:
    return Provider.objects.create(name="P", slug="p", base_url="http://127.0.0.1:9/v1")


@pytest.mark.parametrize("url", METADATA)
def test_a_provider_base_url_at_the_metadata_service_is_refused(url):
    row = Provider(name="x", slug="x", base_url=url)
    assert "Outbound requests may not go there" in refusal(lambda: row.full_clean())


@pytest.mark.parametrize("field", ["server_metrics_url", "power_url"])
@pytest.mark.parametrize("url", METADATA)
def test_server_metrics_and_power_urls_at_the_metadata_service_are_refused(url, field, provider):
    model = CanonicalModel.objects.create(name="M", slug="m")
    row = Endpoint(provider=provider, model_id="m", canonical_model=model, **{field: url})
    with pytest.raises(ValidationError) as refused:
        row.full_clean()
    assert field in refused.value.message_dict
    assert "may not go there" in " ".join(refused.value.message_dict[field])


@pytest.mark.parametrize(
    "kind, config",
    [
        ("webhook", {"url": "{url}"}),
        ("slack", {"url": "{url}"}),
        ("discord", {"url": "{url}"}),
        ("pagerduty", {"routing_key": "k" * 32, "url": "{url}"}),
        ("opsgenie", {"api_key": "genie-key-0123456789abcdef", "url": "{url}"}),
    ],
)
def test_every_channel_url_at_the_metadata_service_is_refused(kind, config):
    for url in METADATA:
        filled = {k: v.replace("{url}", url) for k, v in config.items()}
        channel = Channel(name="c", kind=kind, config=filled)
        assert "may not go there" in refusal(lambda channel=channel: channel.full_clean()), url


def test_with_the_stricter_setting_a_loopback_url_field_is_refused_too(settings, provider):
    settings.EGRESS_DENY = ["127.0.0.0/8"]
    row = Provider(name="y", slug="y", base_url="http://127.0.0.1:8000/v1")
    assert "refused by EGRESS_DENY" in refusal(lambda: row.full_clean())


def test_the_admin_refuses_a_metadata_base_url(admin_client):
    response = admin_client.post(
        reverse("admin:probes_provider_add"), provider_form(base_url=METADATA[0])
    )
    assert response.status_code == 200
    assert "Outbound requests may not go there" in response.content.decode()
    assert not Provider.objects.exists()


def test_the_yaml_loader_refuses_a_metadata_base_url_with_its_line(tmp_path):
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "providers:\n"
        "  - name: P\n"
        "    slug: p\n"
        "    api_style: openai-chat\n"
        f"    base_url: {METADATA[2]}\n"
        "    requires_key: false\n"
    )
    with pytest.raises(CommandError) as refused:
        call_command("load_catalog", "--file", str(path), stdout=StringIO())
    assert "line 5: base_url: Outbound requests may not go there" in str(refused.value)
    assert not Provider.objects.exists()


def test_a_metadata_address_spelled_as_one_number_is_refused_too():
    # Django's URL validator refuses it before the policy; the door would too.
    row = Provider(name="x", slug="x", base_url="http://2852039166/v1")
    assert refusal(lambda: row.full_clean())


def test_an_otlp_endpoint_at_the_metadata_service_stops_the_start():
    env = clean_env(
        DJANGO_SETTINGS_MODULE="dashboard.settings",
        INFERWATCH_ENV="development",
        OTEL_EXPORTER_OTLP_ENDPOINT="http://169.254.169.254:4318",
    )
    done = run_python(["-c", "import django; django.setup()"], env)
    assert done.returncode != 0
    assert "OTEL_EXPORTER_OTLP_ENDPOINT: 169.254.169.254 is link-local" in done.stderr
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:4318"
    assert run_python(["-c", "import django; django.setup()"], env).returncode == 0
