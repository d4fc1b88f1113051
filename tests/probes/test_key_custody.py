"""No staff member can walk off with a key: real users with real permissions, a real
listener that records every header it receives, the real admin pages and actions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from probes.models import CanonicalModel, Endpoint, Provider
from tests.probes.test_add_endpoint import form as add_endpoint_form
from tests.probes.test_admin import provider_form

pytestmark = pytest.mark.django_db

KEY = "sk-stored-0123456789abcdef"
ENV_KEY = "sk-from-the-environment-0123456789"


@pytest.fixture
def listener() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A server of the staff member's own: it keeps every request's headers."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = b"internal service: secret-page-text"
            self.send_response(403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer  # noqa: N815 (http.server's naming)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # "localhost": another host than the provider's 127.0.0.1, the same machine.
    yield f"http://localhost:{server.server_address[1]}/v1", seen
    server.shutdown()


def staff(client, username: str, *codenames: str):
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


@pytest.fixture
def keyed_provider(sim) -> Provider:
    provider = Provider.objects.create(
        name="Acme", slug="acme", base_url=sim.base_url, enabled=True, extra_headers={}
    )
    provider.set_api_key(KEY)
    provider.extra_headers = {"X-Tenant-Token": "tenant-secret-42"}
    provider.save()
    model = CanonicalModel.objects.create(name="M", slug="m")
    Endpoint.objects.create(provider=provider, model_id="sim-fast", canonical_model=model)
    return provider


def leaked(seen: list[dict[str, str]], *secrets: str) -> bool:
    return any(
        secret in value for headers in seen for value in headers.values() for secret in secrets
    )


def test_a_changer_who_moves_the_host_cannot_make_the_stored_key_leave(
    client, keyed_provider, listener
):
    url, seen = listener
    changer = staff(client, "changer", "view_provider", "change_provider")
    change = reverse("admin:probes_provider_change", args=[keyed_provider.pk])

    saved = changer.post(change, provider_form(base_url=url, name="Acme", slug="acme"), follow=True)
    assert saved.status_code == 200
    assert "stored API key and extra headers (given for the old server) were deleted" in (
        saved.content.decode()
    )
    keyed_provider.refresh_from_db()
    assert keyed_provider.api_key_encrypted == "" and keyed_provider.extra_headers == {}

    tested = changer.post(
        reverse("admin:probes_provider_changelist"),
        {"action": "test_connection", "_selected_action": [keyed_provider.pk]},
        follow=True,
    )
    assert tested.status_code == 200
    assert not leaked(seen, KEY, "tenant-secret-42")


def test_a_path_change_on_the_same_server_keeps_the_key(client, keyed_provider):
    changer = staff(client, "changer", "view_provider", "change_provider")
    change = reverse("admin:probes_provider_change", args=[keyed_provider.pk])
    moved_path = keyed_provider.base_url.rstrip("/") + "/v2"

    changer.post(change, provider_form(base_url=moved_path))

    keyed_provider.refresh_from_db()
    assert keyed_provider.base_url == moved_path
    assert keyed_provider.resolve_key().value == KEY


def test_a_new_key_entered_with_the_move_is_kept(client, keyed_provider, listener):
    url, _ = listener
    changer = staff(client, "changer", "view_provider", "change_provider")
    change = reverse("admin:probes_provider_change", args=[keyed_provider.pk])

    changer.post(change, provider_form(base_url=url, api_key="sk-new-key-for-the-new-host"))

    keyed_provider.refresh_from_db()
    assert keyed_provider.resolve_key().value == "sk-new-key-for-the-new-host"


def test_a_changer_cannot_bind_a_vendors_variable_to_another_host(
    client, keyed_provider, listener, monkeypatch
):
    url, seen = listener
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    changer = staff(client, "changer", "view_provider", "change_provider")
    change = reverse("admin:probes_provider_change", args=[keyed_provider.pk])

    refused = changer.post(change, provider_form(base_url=url, api_key_env="OPENAI_API_KEY"))

    assert refused.status_code == 200  # the form again, with the reason
    assert "OPENAI_API_KEY is bound to api.openai.com, not localhost" in refused.content.decode()
    keyed_provider.refresh_from_db()
    assert keyed_provider.api_key_env == "" and keyed_provider.base_url != url


def test_a_superuser_may_bind_a_variable_to_any_host(admin_client, keyed_provider, listener):
    url, _ = listener
    change = reverse("admin:probes_provider_change", args=[keyed_provider.pk])

    admin_client.post(change, provider_form(base_url=url, api_key_env="OPENAI_API_KEY"))

    keyed_provider.refresh_from_db()
    assert keyed_provider.api_key_env == "OPENAI_API_KEY" and keyed_provider.base_url == url


def test_a_bound_variable_goes_to_its_own_vendor(client, keyed_provider, settings):
    settings.PROVIDER_KEY_ENV_HOSTS = {"ACME_API_KEY": ["*.acme.example"]}
    changer = staff(client, "changer", "view_provider", "change_provider")
    change = reverse("admin:probes_provider_change", args=[keyed_provider.pk])

    changer.post(
        change,
        provider_form(base_url="https://api.acme.example/v1", api_key_env="ACME_API_KEY"),
    )

    keyed_provider.refresh_from_db()
    assert keyed_provider.api_key_env == "ACME_API_KEY"


def test_an_adder_cannot_send_an_environment_key_to_an_unbound_host(client, listener, monkeypatch):
    url, seen = listener
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    adder = staff(client, "adder", "view_provider", "add_provider")
    page = reverse("admin:probes_provider_add_endpoint")

    tested = adder.post(page, add_endpoint_form(url, api_key_env="OPENAI_API_KEY", action="test"))
    created = adder.post(
        page,
        add_endpoint_form(
            url, api_key_env="OPENAI_API_KEY", api_style="openai-chat", action="create"
        ),
    )

    for response in (tested, created):
        assert "OPENAI_API_KEY is bound to api.openai.com" in response.content.decode()
    assert not leaked(seen, ENV_KEY)
    assert not Provider.objects.exists()


def test_add_an_endpoint_never_reads_a_key_variable_in_the_web_process(
    admin_client, listener, monkeypatch
):
    """Even a superuser's test goes without the variable's key: the web process is not
    where provider keys live (the workers read them)."""
    url, seen = listener
    monkeypatch.setenv("ACME_API_KEY", ENV_KEY)
    page = reverse("admin:probes_provider_add_endpoint")

    tested = admin_client.post(
        page, add_endpoint_form(url, api_key_env="ACME_API_KEY", action="test")
    )

    assert seen and not leaked(seen, ENV_KEY)
    assert "is read by the workers only" in tested.content.decode()


def test_the_test_shows_the_status_and_never_the_servers_words(admin_client, listener):
    url, _ = listener
    page = reverse("admin:probes_provider_add_endpoint")

    tested = admin_client.post(page, add_endpoint_form(url, api_style="openai-chat", action="test"))

    text = tested.content.decode()
    assert "auth_error" in text and "HTTP 403" in text
    assert "secret-page-text" not in text and "internal service" not in text


def test_view_only_staff_see_no_header_values(client, keyed_provider):
    viewer = staff(client, "viewer", "view_provider")
    page = viewer.get(reverse("admin:probes_provider_change", args=[keyed_provider.pk]))

    text = page.content.decode()
    assert page.status_code == 200 and "X-Tenant-Token" in text
    assert "tenant-secret-42" not in text and KEY not in text


def test_the_change_form_never_renders_header_values_back(admin_client, keyed_provider):
    page = admin_client.get(reverse("admin:probes_provider_change", args=[keyed_provider.pk]))
    assert "tenant-secret-42" not in page.content.decode()


def test_headers_entered_again_replace_the_stored_ones(admin_client, keyed_provider):
    change = reverse("admin:probes_provider_change", args=[keyed_provider.pk])

    admin_client.post(change, provider_form(new_extra_headers='{"X-Other": "v"}'))
    keyed_provider.refresh_from_db()
    assert keyed_provider.extra_headers == {"X-Other": "v"}

    admin_client.post(change, provider_form())  # left empty: kept
    keyed_provider.refresh_from_db()
    assert keyed_provider.extra_headers == {"X-Other": "v"}


@pytest.mark.parametrize(
    "url", ["http://ops:pass@10.20.30.40:8080/v1", "https://user@api.acme.example/v1"]
)
def test_credentials_in_the_base_url_are_refused(admin_client, url):
    page = reverse("admin:probes_provider_add_endpoint")

    refused = admin_client.post(page, add_endpoint_form(url, action="test"))

    text = refused.content.decode()
    assert "may not contain a user name or password" in text
    assert "pass@" not in text.replace(url, "") and not Provider.objects.exists()


def test_a_provider_is_named_after_host_and_port_never_user_info():
    from probes.onboarding.new_endpoint import provider_name

    assert provider_name("http://10.20.30.40:8080/v1") == "10.20.30.40:8080"
    assert provider_name("https://ops:pass@api.acme.example/v1") == "api.acme.example"


def test_an_address_the_egress_policy_refuses_is_refused_when_saved(admin_client):
    page = reverse("admin:probes_provider_add_endpoint")

    refused = admin_client.post(page, add_endpoint_form("http://169.254.169.254/v1", action="test"))

    text = refused.content.decode()
    assert "Outbound requests may not go there: 169.254.169.254 is link-local" in text
    assert not Provider.objects.exists()


def test_view_only_staff_never_see_a_password_in_an_old_base_url(client, keyed_provider):
    # Stored before such URLs were refused (SQL, an old catalog).
    Provider.objects.filter(pk=keyed_provider.pk).update(
        base_url="http://ops:hunter2-pass@10.20.30.40:8080/v1"
    )
    viewer = staff(client, "viewer", "view_provider")
    for url in (
        reverse("admin:probes_provider_changelist"),
        reverse("admin:probes_provider_change", args=[keyed_provider.pk]),
    ):
        text = viewer.get(url).content.decode()
        assert "10.20.30.40:8080/v1" in text and "hunter2-pass" not in text, url
