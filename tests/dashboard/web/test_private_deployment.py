"""Production defaults of a private (REQUIRE_LOGIN) deployment behind a TLS proxy:
/metrics takes a bearer token, /status tells anonymous visitors only ok or fail, and
X-Forwarded-Proto is believed only from a trusted proxy."""

from __future__ import annotations

import ipaddress
import secrets

import pytest

from tests.conftest import clean_env, run_python

TOKEN = secrets.token_urlsafe(32)


@pytest.fixture
def private(settings):
    settings.REQUIRE_LOGIN = True
    settings.METRICS_BEARER_TOKEN = TOKEN
    return settings


def test_metrics_answers_a_scraper_with_the_bearer_token(client, history, private):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics").headers["WWW-Authenticate"].startswith("Bearer")
    for wrong in ("", TOKEN[:-1], TOKEN + "x", TOKEN.upper(), f"Basic {TOKEN}"):
        header = wrong if wrong.startswith("Basic") else f"Bearer {wrong}"
        assert client.get("/metrics", HTTP_AUTHORIZATION=header).status_code == 401, wrong
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    assert b"inferwatch_time_to_first_token_seconds_bucket" in response.content
    # The token opens /metrics and its alert annotations only, never the pages, the API
    # or the badges.
    assert client.get("/metrics/alerts.json").status_code == 401
    alerts = client.get("/metrics/alerts.json", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert alerts.status_code == 200 and alerts.json() == []
    assert client.get("/api/v1/runs", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 302
    badge = f"/badges/endpoints/{history['endpoints']['fast'].pk}/ttft.svg"
    assert client.get(badge, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 302


def test_metrics_without_a_token_setting_needs_a_login(client, history, private, django_user_model):
    private.METRICS_BEARER_TOKEN = ""
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer ").status_code == 401
    client.force_login(django_user_model.objects.create_user("reader", password="pw"))
    assert client.get("/metrics").status_code == 200


def test_status_tells_anonymous_visitors_only_ok_or_fail(client, db, private, django_user_model):
    anonymous = client.get("/status.json")
    assert anonymous.status_code in (200, 503)  # no worker in tests: fail, and says so
    assert set(anonymous.json()) == {"status", "checked_at"}
    assert anonymous.json()["status"] in ("ok", "fail")
    page = client.get("/status").content.decode()
    assert "Postgres" not in page and "Redis" not in page
    assert "Details are shown to signed-in staff" in page

    client.force_login(django_user_model.objects.create_user("viewer", password="pw"))
    assert "checks" not in client.get("/status.json").json()  # signed in, not staff
    client.force_login(django_user_model.objects.create_user("ops", password="pw", is_staff=True))
    staff = client.get("/status.json").json()
    assert {check["name"] for check in staff["checks"]} >= {"database", "redis"}


def test_status_shows_everything_on_a_public_site(client, db, settings):
    settings.REQUIRE_LOGIN = False
    assert {c["name"] for c in client.get("/status.json").json()["checks"]} >= {"database"}


@pytest.fixture
def behind_proxy(settings):
    settings.TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.0/8")]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_SSL_REDIRECT = True
    return settings


def test_the_proxy_may_say_a_request_came_over_https(client, db, behind_proxy):
    response = client.get("/methodology/", REMOTE_ADDR="10.1.2.3", HTTP_X_FORWARDED_PROTO="https")
    assert response.status_code == 200


def test_anyone_else_saying_so_is_not_believed(client, db, behind_proxy):
    for peer in ("203.0.113.9", "11.0.0.1", "not-an-address"):
        response = client.get("/methodology/", REMOTE_ADDR=peer, HTTP_X_FORWARDED_PROTO="https")
        assert response.status_code == 301 and response["Location"].startswith("https://"), peer


def test_production_believes_no_proxy_unless_told(tmp_path):
    show = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.SECURE_PROXY_SSL_HEADER, settings.TRUSTED_PROXIES)"
    )
    base = {
        "INFERWATCH_ENV": "production",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
    }
    plain = run_python(["-c", show], clean_env(**base))
    assert plain.stdout.strip() == "None []", plain.stderr
    told = run_python(["-c", show], clean_env(**base, TRUSTED_PROXIES="172.16.0.0/12, ::1"))
    assert "HTTP_X_FORWARDED_PROTO" in told.stdout and "172.16.0.0/12" in told.stdout
    bad = run_python(["-c", show], clean_env(**base, TRUSTED_PROXIES="everyone"))
    assert "TRUSTED_PROXIES: 'everyone' is not an IP address" in bad.stderr
