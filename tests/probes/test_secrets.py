"""Provider keys: never shown to anyone, read only from allowed variables, rotatable.

Real admin pages through Django's test client, real Postgres, real Fernet tokens.
"""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.urls import reverse

from probes.catalog.seeds import PROVIDERS
from probes.models import Provider
from probes.platform import secrets
from tests.conftest import clean_env, run_python
from tests.probes.test_admin import provider_form

pytestmark = pytest.mark.django_db

KEY = "sk-live-abcdef0123456789"
ENV_KEY = "sk-env-fedcba9876543210"


@pytest.fixture
def provider():
    return Provider.objects.create(
        name="Acme", slug="acme", base_url="https://api.acme.example/v1", enabled=True
    )


@pytest.fixture
def viewer(client):
    """Staff who may look at the catalog but change nothing."""
    user = User.objects.create_user("viewer", "viewer@example.com", "pw", is_staff=True)
    codenames = ["view_provider", "view_endpoint", "view_probe"]
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


def change_url(provider: Provider) -> str:
    return f"/admin/probes/provider/{provider.pk}/change/"


def assert_no_key(html: str, provider: Provider, *keys: str) -> None:
    for secret in (*keys, provider.api_key_encrypted):
        assert not secret or secret not in html
    # Not even a prefix or suffix of the key: "sk-live-abc…" or "…6789" is still a leak.
    for secret in keys:
        assert secret[:8] not in html and secret[-6:] not in html


# -- nobody sees a stored key -----------------------------------------------------------------


def test_a_view_only_user_sees_where_the_key_comes_from_never_the_key(viewer, provider):
    provider.set_api_key(KEY)
    provider.save()

    response = viewer.get(change_url(provider))

    assert response.status_code == 200
    html = response.content.decode()
    assert_no_key(html, provider, KEY)
    assert "stored, encrypted" in html
    assert 'name="api_key"' not in html


def test_a_view_only_user_never_sees_an_environment_key(viewer, provider, monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", ENV_KEY)
    provider.api_key_env = "ACME_API_KEY"
    provider.save()

    for url in (change_url(provider), "/admin/probes/provider/"):
        html = viewer.get(url).content.decode()
        assert_no_key(html, provider, ENV_KEY)
        assert "environment (ACME_API_KEY)" in html


def test_the_changelist_shows_only_the_keys_status(viewer, provider):
    provider.set_api_key(KEY)
    provider.save()
    html = viewer.get("/admin/probes/provider/").content.decode()
    assert_no_key(html, provider, KEY)
    assert "stored, encrypted" in html


def test_saving_a_key_leaves_no_trace_of_it_in_the_history(admin_client, provider):
    response = admin_client.post(change_url(provider), provider_form(api_key=KEY))
    assert response.status_code == 302

    entry = LogEntry.objects.get(object_id=str(provider.pk))
    assert "API key" in entry.get_change_message()
    assert KEY not in entry.change_message
    history = admin_client.get(change_url(provider).replace("change", "history"))
    assert history.status_code == 200
    provider.refresh_from_db()
    assert_no_key(history.content.decode(), provider, KEY)


def test_the_key_never_appears_in_the_objects_repr():
    key = Provider(
        name="x", slug="x", base_url="https://x.example/v1", api_key_encrypted=secrets.encrypt(KEY)
    ).resolve_key()
    assert key.value == KEY
    assert KEY not in repr(key)


# -- api_key_env names only variables the operator allowed ------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "DATABASE_URL",
        "SECRET_KEY",
        "SECRET_KEY_FILE",
        "FIELD_ENCRYPTION_KEY",
        "FIELD_ENCRYPTION_KEY_FALLBACKS",
        "EMAIL_HOST_PASSWORD",
        "CELERY_BROKER_URL",
        "REDIS_URL",
        "POSTGRES_PASSWORD",
        "ACME_TOKEN",  # not matching the default allow-list (*_API_KEY)
    ],
)
def test_the_admin_refuses_a_key_variable_that_is_not_allowed(admin_client, provider, name):
    response = admin_client.post(change_url(provider), provider_form(api_key_env=name))

    assert response.status_code == 200
    (error,) = response.context["adminform"].form.errors["api_key_env"]
    assert name in error
    provider.refresh_from_db()
    assert provider.api_key_env == ""


def test_the_admin_accepts_an_allowed_variable(admin_client, provider):
    response = admin_client.post(change_url(provider), provider_form(api_key_env="ACME_API_KEY"))
    assert response.status_code == 302
    provider.refresh_from_db()
    assert provider.api_key_env == "ACME_API_KEY"


def test_the_allow_list_is_a_setting_but_never_opens_the_apps_own_secrets(
    admin_client, provider, settings
):
    settings.PROVIDER_KEY_ENV_ALLOWED = ["ACME_*"]
    ok = admin_client.post(change_url(provider), provider_form(api_key_env="ACME_TOKEN"))
    assert ok.status_code == 302
    refused = admin_client.post(change_url(provider), provider_form(api_key_env="GROQ_API_KEY"))
    assert "GROQ_API_KEY" in refused.context["adminform"].form.errors["api_key_env"][0]

    settings.PROVIDER_KEY_ENV_ALLOWED = ["*"]
    for own in ("SECRET_KEY", "DATABASE_URL", "EMAIL_HOST_PASSWORD", "ACME_API_KEY_FILE"):
        assert "Inferwatch's own settings" in secrets.env_name_refusal(own)


def test_a_refused_variable_stored_behind_the_forms_back_is_never_read(provider, monkeypatch):
    # As if inserted with SQL or an old load_catalog: no form validated it.
    monkeypatch.setenv("DATABASE_URL", "postgresql://u:hunter2@db/x")
    Provider.objects.filter(pk=provider.pk).update(api_key_env="DATABASE_URL")
    provider.refresh_from_db()

    key = provider.resolve_key()

    assert key.value is None
    assert "DATABASE_URL is one of Inferwatch's own settings" in key.problem
    assert not provider.has_key
    assert "hunter2" not in provider.key_status


def test_the_settings_refuse_a_malformed_allow_list(tmp_path):
    env = clean_env(
        INFERWATCH_ENV="development",
        INFERWATCH_VAR_DIR=str(tmp_path),
        PROVIDER_KEY_ENV_ALLOWED="*_API_KEY,acme key",
    )
    result = run_python(["manage.py", "check"], env)
    assert result.returncode != 0
    assert "PROVIDER_KEY_ENV_ALLOWED: 'acme key' is not a variable name pattern" in result.stderr


# -- rotation -----------------------------------------------------------------------------------


def test_an_old_field_key_still_decrypts_and_a_save_re_encrypts_under_the_new_one(
    provider, settings
):
    settings.FIELD_ENCRYPTION_KEY = "old-field-key"
    provider.set_api_key(KEY)
    provider.save()

    settings.FIELD_ENCRYPTION_KEY = "new-field-key"
    settings.FIELD_ENCRYPTION_KEY_FALLBACKS = ["old-field-key"]
    provider.refresh_from_db()
    assert provider.resolve_key().value == KEY

    provider.save()
    settings.FIELD_ENCRYPTION_KEY_FALLBACKS = []
    provider.refresh_from_db()
    assert provider.resolve_key().value == KEY


def test_a_key_stored_under_an_old_secret_key_is_read_through_secret_key_fallbacks(
    provider, settings
):
    # No separate FIELD_ENCRYPTION_KEY: it defaults to SECRET_KEY, rotated with Django's
    # own SECRET_KEY_FALLBACKS.
    settings.SECRET_KEY = settings.FIELD_ENCRYPTION_KEY = "old-secret-" + "x" * 50
    provider.set_api_key(KEY)
    provider.save()

    settings.SECRET_KEY = settings.FIELD_ENCRYPTION_KEY = "new-secret-" + "y" * 50
    provider.refresh_from_db()
    assert provider.resolve_key().problem == secrets.UNDECRYPTABLE

    settings.SECRET_KEY_FALLBACKS = ["old-secret-" + "x" * 50]
    assert provider.resolve_key().value == KEY


def test_rotate_keys_re_encrypts_what_it_can_and_names_what_it_cannot(settings):
    settings.FIELD_ENCRYPTION_KEY = "old-field-key"
    readable = Provider.objects.create(name="A", slug="a", base_url="https://a.example/v1")
    readable.set_api_key(KEY)
    readable.save()
    settings.FIELD_ENCRYPTION_KEY = "lost-field-key"
    lost = Provider.objects.create(name="B", slug="b", base_url="https://b.example/v1")
    lost.set_api_key("sk-b-key")
    lost.save()
    settings.FIELD_ENCRYPTION_KEY = "new-field-key"
    settings.FIELD_ENCRYPTION_KEY_FALLBACKS = ["old-field-key"]

    with pytest.raises(CommandError, match=r"1 stored key\(s\) cannot be decrypted.*: B\."):
        call_command("rotate_keys")

    settings.FIELD_ENCRYPTION_KEY_FALLBACKS = []
    readable.refresh_from_db()
    lost.refresh_from_db()
    assert readable.resolve_key().value == KEY
    assert lost.resolve_key().problem == secrets.UNDECRYPTABLE
    assert lost.api_key_encrypted  # kept, so the old secret can still bring it back


def test_the_settings_read_old_keys_from_a_list_or_a_file(tmp_path):
    old_keys = tmp_path / "old_keys"
    old_keys.write_text("field-one\nfield-two\n")
    env = clean_env(
        INFERWATCH_ENV="development",
        INFERWATCH_VAR_DIR=str(tmp_path),
        SECRET_KEY_FALLBACKS="secret-one, secret-two",
        FIELD_ENCRYPTION_KEY_FALLBACKS_FILE=str(old_keys),
        DJANGO_SETTINGS_MODULE="dashboard.settings",
    )
    code = (
        "from django.conf import settings as s; "
        "print(s.SECRET_KEY_FALLBACKS, s.FIELD_ENCRYPTION_KEY_FALLBACKS)"
    )
    result = run_python(["-c", code], env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['secret-one', 'secret-two'] ['field-one', 'field-two']"


# -- an undecryptable key is said so, in the admin and on /status ----------------------------


@pytest.fixture
def undecryptable(provider, settings):
    settings.FIELD_ENCRYPTION_KEY = "a-field-key-since-rotated"
    provider.set_api_key(KEY)
    provider.save()
    settings.FIELD_ENCRYPTION_KEY = "the-current-field-key"
    provider.refresh_from_db()
    return provider


def test_the_admin_says_a_stored_key_cannot_be_decrypted(admin_client, undecryptable):
    for url in (change_url(undecryptable), "/admin/probes/provider/"):
        html = admin_client.get(url).content.decode()
        assert "cannot be decrypted" in html
        assert "stored, encrypted" not in html


def test_status_names_the_providers_whose_key_cannot_be_decrypted(client, undecryptable):
    Provider.objects.create(name="Fine", slug="fine", base_url="https://f.example/v1")

    response = client.get("/status?format=json")

    keys = next(c for c in response.json()["checks"] if c["name"] == "keys")
    assert keys["state"] == "fail"
    assert "Acme" in keys["message"] and "Fine" not in keys["message"]
    assert "cannot be decrypted" in keys["details"][0]["problem"]
    # 200 whatever the state (load balancers read /readyz); the body says fail.
    assert response.status_code == 200 and response.json()["status"] == "fail"
    assert "Acme" in client.get("/status").content.decode()


def test_status_only_warns_about_a_disabled_providers_key(client, undecryptable):
    Provider.objects.filter(pk=undecryptable.pk).update(enabled=False)
    response = client.get("/status?format=json")
    keys = next(c for c in response.json()["checks"] if c["name"] == "keys")
    assert keys["state"] == "warn"


def test_every_seed_providers_key_variable_is_allowed_by_default():
    names = [seed.api_key_env for seed in PROVIDERS if seed.api_key_env]
    assert names and [n for n in names if secrets.env_name_refusal(n)] == []


def test_the_extra_headers_box_starts_empty_not_null(admin_client, provider):
    """A pre-filled `null` reads as a stored value and would be sent back as one."""
    import re

    for url in (change_url(provider), reverse("admin:probes_provider_add")):
        html = admin_client.get(url).content.decode()
        (box,) = re.findall(
            r'<textarea[^>]*name="new_extra_headers"[^>]*>(.*?)</textarea>', html, re.S
        )
        assert box.strip() == "", url
