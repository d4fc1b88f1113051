"""Keys bound where they are used: a key is bound to the origin (scheme, host, port) its
provider was saved with, and the one door out sends it nowhere else, checked when the
request is sent. A real listener on loopback records every request it gets."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from dashboard.status.checks import check_provider_keys
from probes.engine import ProbeRequest, measure_sync, tokenize
from probes.models import ProbeRun, Provider
from probes.slots import run as runner
from tests.door_listener import CountingListener
from tests.probes.test_add_endpoint import form as add_endpoint_form
from tests.probes.test_admin import provider_form
from tests.probes.test_key_custody import staff

pytestmark = pytest.mark.django_db

ENV_KEY = "sk-acme-environment-key-0123456789"


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    server = CountingListener()
    yield server
    server.stop()


@pytest.fixture
def acme_env(monkeypatch, settings) -> None:
    monkeypatch.setenv("ACME_API_KEY", ENV_KEY)
    settings.PROVIDER_KEY_ENV_HOSTS = {"ACME_API_KEY": ["127.0.0.1"]}


def https_provider(listener: CountingListener) -> Provider:
    """Saved with its env key at https on the listener's host and port: bound there."""
    return Provider.objects.create(
        name="Acme",
        slug="acme",
        base_url=f"https://127.0.0.1:{listener.server_address[1]}/v1",
        api_key_env="ACME_API_KEY",
        enabled=True,
        first_token_timeout_s=3,
        total_timeout_s=5,
    )


def carried_the_key(listener: CountingListener) -> bool:
    return any(ENV_KEY in head for head in listener.heads)


# -- binding ---------------------------------------------------------------------------------


def test_a_key_is_bound_to_the_origin_it_was_saved_with(acme_env, listener):
    provider = https_provider(listener)
    port = listener.server_address[1]
    assert provider.key_origin == f"https://127.0.0.1:{port}"

    stored = Provider(name="B", slug="b", base_url="http://Example.test/v1")
    stored.set_api_key("sk-stored")
    stored.save()
    assert stored.key_origin == "http://example.test:80"
    stored.set_api_key("")
    stored.save()
    assert stored.key_origin == ""  # no key, no binding


def test_an_env_bound_key_moved_from_https_to_http_is_not_sent(
    acme_env, listener, make_probe, workload
):
    provider = https_provider(listener)
    # Behind the model's back (a bulk update, SQL): https -> http, same host and port.
    Provider.objects.filter(pk=provider.pk).update(base_url=listener.url + "/v1")
    provider.refresh_from_db()
    probe = make_probe("sim-fast", provider=provider)

    runner.run_slot(probe, datetime(2026, 6, 1, tzinfo=UTC), "w1", "local")

    (run,) = ProbeRun.objects.filter(probe=probe)
    assert run.status == "auth_error"
    assert f"bound to https://127.0.0.1:{listener.server_address[1]}, not http://" in run.error
    assert listener.connections == 0 and not carried_the_key(listener)
    # A plain save (not a superuser's) does not bind it again either.
    provider.save()
    assert provider.key_origin.startswith("https://")
    # /status names the provider and why.
    check = check_provider_keys()
    assert check.details and check.details[0]["provider"] == "Acme"
    assert "bound to https://" in check.details[0]["problem"]


def test_the_door_itself_refuses_to_send_a_key_elsewhere(listener):
    # The runner checks first; the door checks again at send time, for every request of
    # the client (warm-up, measured request, tokenizer).
    port = listener.server_address[1]
    moved = ProbeRequest(
        api="openai-chat",
        base_url=listener.url + "/v1",
        model="m",
        api_key=ENV_KEY,
        key_origin=f"https://127.0.0.1:{port}",
        token_counter="vllm",
    )
    result = measure_sync(moved)
    assert result.status == "auth_error" and "key policy" in result.error
    with pytest.raises(tokenize.TokenizeError, match="key policy"):
        tokenize.count_texts_sync(
            "vllm",
            moved.base_url,
            "m",
            ["x"],
            headers=moved.headers(),
            keys=moved.key_bindings(),
        )
    assert listener.connections == 0

    # Bound where it goes: it is sent (the listener is the witness).
    measure_sync(ProbeRequest(**{**moved.__dict__, "key_origin": f"http://127.0.0.1:{port}"}))
    assert carried_the_key(listener)


# -- who may bind again ------------------------------------------------------------------------


def test_a_changer_cannot_move_a_bound_key_to_http(acme_env, listener, client):
    provider = https_provider(listener)
    changer = staff(client, "changer", "view_provider", "change_provider")
    change = reverse("admin:probes_provider_change", args=[provider.pk])
    http_url = listener.url + "/v1"

    refused = changer.post(
        change, provider_form(name="Acme", base_url=http_url, api_key_env="ACME_API_KEY")
    )

    assert refused.status_code == 200
    assert "in cleartext" in refused.content.decode()  # a bound host admits https only
    provider.refresh_from_db()
    assert provider.base_url.startswith("https://")


def test_a_superusers_save_binds_the_key_again(acme_env, listener, admin_client):
    provider = https_provider(listener)
    change = reverse("admin:probes_provider_change", args=[provider.pk])
    http_url = listener.url + "/v1"

    done = admin_client.post(
        change, provider_form(name="Acme", base_url=http_url, api_key_env="ACME_API_KEY")
    )

    assert done.status_code == 302
    provider.refresh_from_db()
    assert provider.key_origin == f"http://127.0.0.1:{listener.server_address[1]}"
    assert provider.resolve_key().value == ENV_KEY


def test_an_env_binding_to_a_full_origin_binds_the_key_there(acme_env, listener, settings):
    provider = https_provider(listener)
    http_origin = f"http://127.0.0.1:{listener.server_address[1]}"
    settings.PROVIDER_KEY_ENV_HOSTS = {"ACME_API_KEY": [http_origin]}
    provider.base_url = http_origin + "/v1"
    provider.save()
    assert provider.key_origin == http_origin and provider.resolve_key().value == ENV_KEY


# -- the YAML loader ---------------------------------------------------------------------------


def load_yaml(tmp_path, text: str) -> str:
    path = tmp_path / "catalog.yaml"
    path.write_text(text)
    out = StringIO()
    call_command("load_catalog", "--file", str(path), stdout=out)
    return out.getvalue()


def row(base_url: str, name: str = "ACME_API_KEY") -> str:
    return (
        "providers:\n"
        "  - name: Acme\n"
        "    slug: acme\n"
        "    api_style: openai-chat\n"
        f"    base_url: {base_url}\n"
        f"    api_key_env: {name}\n"
    )


def test_the_loader_refuses_a_key_paired_with_a_host_it_is_not_bound_to(tmp_path, acme_env):
    with pytest.raises(CommandError, match=r"line 6: api_key_env: ACME_API_KEY is bound to"):
        load_yaml(tmp_path, row("https://elsewhere.test/v1"))
    assert not Provider.objects.exists()


def test_the_loader_refuses_to_move_a_bound_key_to_http(tmp_path, acme_env, listener):
    https_provider(listener)
    port = listener.server_address[1]
    with pytest.raises(CommandError, match=r"line 6: api_key_env: .* in cleartext"):
        load_yaml(tmp_path, row(f"http://127.0.0.1:{port}/v1"))
    assert Provider.objects.get(slug="acme").base_url.startswith("https://")
    # The same row with the key where it is bound loads (nothing to change).
    assert "up to date" in load_yaml(tmp_path, row(f"https://127.0.0.1:{port}/v1"))


# -- no path binds an env key to http for a non-superuser (issue 33 item 3) --------------------


def _post(client, url: str, **fields):
    return client.post(url, provider_form(name="Acme", **fields))


def test_an_adder_cannot_bind_a_bound_hosts_key_to_http(acme_env, listener, client):
    adder = staff(client, "adder", "view_provider", "add_provider")
    refused = _post(
        adder,
        reverse("admin:probes_provider_add"),
        base_url=listener.url + "/v1",
        api_key_env="ACME_API_KEY",
    )
    assert refused.status_code == 200 and "in cleartext" in refused.content.decode()
    assert not Provider.objects.exists()


def test_a_changer_cannot_bind_it_to_http_by_renaming_the_variable(acme_env, listener, client):
    plain = Provider.objects.create(name="Acme", slug="acme", base_url=listener.url + "/v1")
    changer = staff(client, "changer", "view_provider", "change_provider")
    change = reverse("admin:probes_provider_change", args=[plain.pk])

    refused = _post(changer, change, base_url=listener.url + "/v1", api_key_env="ACME_API_KEY")

    assert refused.status_code == 200 and "in cleartext" in refused.content.decode()
    plain.refresh_from_db()
    assert plain.api_key_env == "" and plain.key_origin == ""


def test_a_changer_cannot_bind_it_to_http_in_two_saves(acme_env, listener, client):
    provider = https_provider(listener)
    changer = staff(client, "changer", "view_provider", "change_provider")
    change = reverse("admin:probes_provider_change", args=[provider.pk])
    http_url = listener.url + "/v1"

    first = _post(changer, change, base_url=http_url, api_key_env="")  # the key taken off
    second = _post(changer, change, base_url=http_url, api_key_env="ACME_API_KEY")

    assert first.status_code == 302
    assert second.status_code == 200 and "in cleartext" in second.content.decode()
    provider.refresh_from_db()
    assert provider.api_key_env == "" and not provider.key_origin.startswith("http://")


def test_add_an_endpoint_cannot_bind_it_to_http(acme_env, listener, client):
    adder = staff(client, "adder", "view_provider", "add_provider")
    created = adder.post(
        reverse("admin:probes_provider_add_endpoint"),
        add_endpoint_form(
            listener.url + "/v1",
            api_key_env="ACME_API_KEY",
            api_style="openai-chat",
            action="create",
        ),
    )
    assert "in cleartext" in created.content.decode()
    assert not Provider.objects.exists()


def test_the_loader_cannot_bind_it_to_http(tmp_path, acme_env, listener):
    with pytest.raises(CommandError, match=r"line 6: api_key_env: .* in cleartext"):
        load_yaml(tmp_path, row(listener.url + "/v1"))
    assert not Provider.objects.exists()
