"""A public surface that stays cheap (issue 24, item 5), with real Postgres and Redis.

- /status decides who is asking before it runs a check: anonymous clients share one
  report per PUBLIC_SURFACE_CACHE_S, staff get fresh checks; /metrics likewise;
- without Redis the limiter and the login throttle still limit (per process);
- a switched-off channel's reason (the receiver's words) is for staff only.
"""

from __future__ import annotations

import pytest

from dashboard import ratelimit
from dashboard.alerts.models import Channel
from dashboard.status import views as status_views
from dashboard.web import prometheus

pytestmark = pytest.mark.django_db

NO_REDIS = "redis://127.0.0.1:1/0"  # nothing listens there


@pytest.fixture
def cached(settings):
    settings.PUBLIC_SURFACE_CACHE_S = 60
    settings.STATUS_PUBLIC_DETAILS = False
    status_views._anonymous_report.clear()
    prometheus._anonymous_body.clear()
    yield settings
    status_views._anonymous_report.clear()
    prometheus._anonymous_body.clear()


def test_a_flood_of_anonymous_status_polls_runs_the_checks_once(client, cached, monkeypatch):
    calls = []
    real = status_views.run_checks
    monkeypatch.setattr(status_views, "run_checks", lambda: calls.append(1) or real())

    answers = [client.get("/status.json") for _ in range(20)]

    assert len(calls) == 1
    assert {a.status_code for a in answers} <= {200, 503}
    assert all(set(a.json()) == {"status", "checked_at"} for a in answers)


def test_staff_get_fresh_checks(client, cached, monkeypatch, django_user_model):
    calls = []
    real = status_views.run_checks
    monkeypatch.setattr(status_views, "run_checks", lambda: calls.append(1) or real())
    client.force_login(django_user_model.objects.create_user("ops", password="pw", is_staff=True))

    for _ in range(3):
        assert "checks" in client.get("/status.json").json()

    assert len(calls) == 3


def test_anonymous_metrics_are_rendered_once_per_period(client, cached, django_user_model):
    bodies = {client.get("/metrics").content for _ in range(10)}
    assert len(bodies) == 1 and prometheus._anonymous_body.computed == 1

    client.force_login(django_user_model.objects.create_user("ops", password="pw", is_staff=True))
    client.get("/metrics")
    assert prometheus._anonymous_body.computed == 1  # a signed-in scrape is fresh, not shared


def test_without_redis_the_limiter_still_limits(client, settings):
    settings.REDIS_URL = NO_REDIS
    settings.RATE_LIMIT_PER_MINUTE = 3
    address = {"REMOTE_ADDR": "10.77.0.1"}

    answers = [client.get("/api/v1/", **address).status_code for _ in range(4)]

    assert answers == [200, 200, 200, 429]
    assert client.get("/api/v1/", REMOTE_ADDR="10.77.0.2").status_code == 200


def test_without_redis_sign_in_attempts_are_still_throttled(client, settings, django_user_model):
    settings.REDIS_URL = NO_REDIS
    settings.RATE_LIMIT_PER_MINUTE = 0
    settings.LOGIN_ATTEMPTS_PER_HOUR = 2
    django_user_model.objects.create_superuser("chief", "c@example.com", "right-password")
    wrong = {"username": "chief", "password": "guess"}
    address = {"REMOTE_ADDR": "10.77.0.3"}

    tries = [client.post("/admin/login/", wrong, **address).status_code for _ in range(2)]
    refused = client.post(
        "/admin/login/", {"username": "chief", "password": "right-password"}, **address
    )

    assert tries == [200, 200]
    assert refused.status_code == 429
    assert ratelimit._local  # counted in this process


def test_a_switched_off_channels_reason_is_for_staff_only(client, django_user_model):
    Channel.objects.create(
        name="Ops hook",
        kind="email",
        config={"to": ["oncall@example.com"]},
        enabled=False,
        disabled_reason="HTTP 403 from the receiver: internal-gateway-7 denied",
    )
    page = client.get("/alerts/").content.decode()
    assert "Ops hook" in page and "internal-gateway-7" not in page

    client.force_login(django_user_model.objects.create_user("ops", password="pw", is_staff=True))
    assert "internal-gateway-7" in client.get("/alerts/").content.decode()
