"""The public surface is small and cheap: lists never load timelines, a real Redis-backed
limiter answers 429 beyond its rate, sign-in attempts are throttled, anonymous visitors see
no host names, recipients, database names or switched-off providers, and every answer
carries the Content-Security-Policy."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.alerts.models import Channel
from probes.models import ProbeRun
from probes.platform.redis_client import redis_client
from tests.dashboard.web.conftest import (
    make_endpoint,
    make_model,
    make_provider,
    make_run,
    make_workload,
)

# Entries per stored timeline: the order of the engine's per-run limit. What matters is
# that a list's cost does not grow with it.
TIMELINE_ENTRIES = 50_000
TIMELINE_COLUMN = '"probes_proberun"."timeline"'


def big_timeline() -> dict:
    return {
        "t_us": list(range(0, TIMELINE_ENTRIES * 100, 100)),
        "ch": "a" * TIMELINE_ENTRIES,
        "tok": [1] * TIMELINE_ENTRIES,
    }


@pytest.fixture
def flooded(db):
    """One provider's 20 runs at the timeline size, as one group of 20 requests plus its
    summary row (the run page lists the members)."""
    endpoint = make_endpoint(make_provider("Flood"), make_model("Big"), "big-1")
    workload = make_workload()
    group, timeline, now = uuid.uuid4(), big_timeline(), timezone.now()
    ProbeRun.objects.bulk_create(
        ProbeRun(
            endpoint=endpoint,
            workload=workload,
            region="eu-west",
            started_at=now - timedelta(seconds=i),
            status="ok",
            role="step",
            run_group=group,
            request_index=i + 1,
            worker="worker-7@db-host-internal",
            timeline=timeline,
            methodology_version="1",
        )
        for i in range(20)
    )
    summary = make_run(
        endpoint, workload, ago=timedelta(0), role="group", run_group=group, request_index=0
    )
    return {"endpoint": endpoint, "summary": summary}


def timeline_reads(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200, url
    return sum(TIMELINE_COLUMN in q["sql"] for q in queries.captured_queries)


def test_list_views_never_load_a_timeline(client, flooded):
    endpoint = flooded["endpoint"]
    for url in (
        "/api/v1/runs",
        "/api/v1/runs?limit=100",
        f"/providers/{endpoint.provider.slug}/",
        f"/models/{endpoint.canonical_model.slug}/",
        f"/endpoints/{endpoint.pk}/",
    ):
        assert timeline_reads(client, url) == 0, url
    # A run's page reads its own timeline (its chart), never its group members'.
    assert timeline_reads(client, f"/runs/{flooded['summary'].pk}/") == 1


def best_of(client, url: str, tries: int = 3) -> float:
    client.get(url)  # warm: templates compiled, connections open
    times = []
    for _ in range(tries):
        t0 = time.perf_counter()
        assert client.get(url).status_code == 200
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def test_runs_api_and_run_page_stay_under_200_ms_with_flooded_runs(client, flooded):
    assert best_of(client, "/api/v1/runs") < 200
    assert best_of(client, f"/runs/{flooded['summary'].pk}/") < 200


# -- the limiter ----------------------------------------------------------------------------


@pytest.fixture
def limiter(settings, time_machine):
    # The windows are fixed minutes: a test whose requests straddled a minute's turn
    # would count them in two windows and never reach its limit. The clock stands still
    # ten seconds into a minute (Redis keeps its own for the keys' expiry).
    time_machine.move_to(dt.datetime(2026, 12, 3, 12, 0, 10, tzinfo=dt.UTC), tick=False)
    r = redis_client()
    for key in r.scan_iter("inferwatch:ratelimit:*"):
        r.delete(key)
    settings.RATE_LIMIT_PER_MINUTE = 3
    yield settings
    for key in r.scan_iter("inferwatch:ratelimit:*"):
        r.delete(key)


def test_the_limiter_answers_429_with_retry_after_beyond_its_rate(client, db, limiter):
    answers = [client.get("/api/v1/").status_code for _ in range(3)]
    refused = client.get("/api/v1/")

    assert answers == [200, 200, 200]
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert "Too many requests" in refused.json()["error"]
    page = client.get("/methodology/")
    assert page.status_code == 429 and page["Content-Type"].startswith("text/plain")
    assert "Content-Security-Policy" in page


def test_each_client_address_has_its_own_budget(client, db, limiter):
    for _ in range(4):
        client.get("/api/v1/", REMOTE_ADDR="10.9.9.1")
    assert client.get("/api/v1/", REMOTE_ADDR="10.9.9.1").status_code == 429
    assert client.get("/api/v1/", REMOTE_ADDR="10.9.9.2").status_code == 200


def test_a_client_cannot_pick_its_bucket_with_x_forwarded_for(client, db, limiter):
    for i in range(4):
        client.get("/api/v1/", REMOTE_ADDR="10.9.9.3", HTTP_X_FORWARDED_FOR=f"1.2.3.{i}")
    assert client.get("/api/v1/", REMOTE_ADDR="10.9.9.3").status_code == 429


def test_behind_a_trusted_proxy_the_forwarded_client_is_limited(client, db, limiter):
    import ipaddress

    limiter.TRUSTED_PROXIES = [ipaddress.ip_network("10.0.0.0/8")]
    proxy = {"REMOTE_ADDR": "10.0.0.2"}
    for _ in range(3):
        client.get("/api/v1/", HTTP_X_FORWARDED_FOR="203.0.113.5", **proxy)
    assert client.get("/api/v1/", HTTP_X_FORWARDED_FOR="203.0.113.5", **proxy).status_code == 429
    assert client.get("/api/v1/", HTTP_X_FORWARDED_FOR="203.0.113.6", **proxy).status_code == 200


def test_static_files_and_health_checks_are_not_counted(client, db, limiter):
    for _ in range(5):
        client.get("/static/css/inferwatch.css")
        client.get("/status.json")
    assert client.get("/api/v1/").status_code == 200


def test_sign_in_attempts_are_throttled(client, django_user_model, limiter):
    limiter.RATE_LIMIT_PER_MINUTE = 0
    limiter.LOGIN_ATTEMPTS_PER_HOUR = 2
    django_user_model.objects.create_superuser("chief", "c@example.com", "right-password")
    wrong = {"username": "chief", "password": "guess"}

    tries = [client.post("/admin/login/", wrong).status_code for _ in range(2)]
    refused = client.post("/admin/login/", {"username": "chief", "password": "right-password"})

    assert tries == [200, 200]  # the form again, "incorrect password"
    assert refused.status_code == 429 and int(refused["Retry-After"]) <= 3600
    assert "sign-in attempts" in refused.content.decode()
    assert client.get("/admin/login/").status_code == 200  # reading the form is not an attempt


# -- what anonymous visitors see ------------------------------------------------------------


def test_status_details_need_a_login_by_default_in_production(client, django_user_model, settings):
    settings.STATUS_PUBLIC_DETAILS = False
    anonymous = client.get("/status.json").json()
    assert set(anonymous) == {"status", "checked_at"}
    assert "test_iw" not in client.get("/status").content.decode()

    staff = django_user_model.objects.create_user("ops", password="pw", is_staff=True)
    client.force_login(staff)
    assert "checks" in client.get("/status.json").json()


def test_the_run_page_names_the_worker_to_staff_only(client, flooded, django_user_model):
    step = ProbeRun.objects.filter(role="step").order_by("request_index").first()
    assert "db-host-internal" not in client.get(f"/runs/{step.pk}/").content.decode()
    client.force_login(django_user_model.objects.create_user("ops", password="pw", is_staff=True))
    assert "db-host-internal" in client.get(f"/runs/{step.pk}/").content.decode()


def test_the_catalog_api_hides_switched_off_providers_from_visitors(
    client, flooded, django_user_model
):
    parked = make_provider("Parked Internal")
    parked.enabled = False
    parked.save()
    make_endpoint(parked, make_model("Other"), "internal-1")

    public = client.get("/api/v1/catalog").json()
    assert "parked-internal" not in {p["slug"] for p in public["providers"]}
    assert "internal-1" not in {e["model_id"] for e in public["endpoints"]}

    client.force_login(django_user_model.objects.create_user("ops", password="pw", is_staff=True))
    staff = client.get("/api/v1/catalog").json()
    assert "parked-internal" in {p["slug"] for p in staff["providers"]}


def test_alerts_never_show_a_switched_off_channels_recipients_to_visitors(
    client, db, django_user_model
):
    Channel.objects.create(
        name="Ops mail",
        kind="email",
        config={"to": ["private-oncall@example.com"]},
        enabled=False,
        disabled_reason="the mail server refused the recipient",
    )
    page = client.get("/alerts/").content.decode()
    assert "Ops mail" in page and "private-oncall@example.com" not in page


# -- the policy on every answer --------------------------------------------------------------


def test_static_files_redirects_and_401s_carry_the_policy(client, db, settings):
    static = client.get("/static/css/inferwatch.css")
    redirect = client.get("/admin/")
    settings.REQUIRE_LOGIN = True
    unauthorised = client.get("/metrics")
    assert static.status_code == 200 and redirect.status_code == 302
    assert unauthorised.status_code == 401
    for response in (static, redirect, unauthorised):
        assert "script-src 'self'" in response["Content-Security-Policy"]
