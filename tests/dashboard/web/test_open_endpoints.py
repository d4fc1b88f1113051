"""The two open endpoints a rate limit does not hold by path, cheap under a flood (issue
33 item 5): /readyz checks the database and Redis once per short period however many
poll, and /metrics/alerts.json shares each minute-wide window's answer among anonymous
callers and counts a caller that keeps naming new windows (the scraper's token excepted).
Real Postgres and Redis; queries counted with Django's own recorder."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboard.status import views as status_views
from dashboard.web import annotations
from probes.platform.redis_client import redis_client

pytestmark = pytest.mark.django_db
NOW = dt.datetime(2026, 12, 3, 12, 0, 10, tzinfo=dt.UTC)
TOKEN = "scraper-token-0123456789"


@pytest.fixture
def shared(settings, time_machine):
    time_machine.move_to(NOW, tick=False)  # one rate-limit window, one cache period
    settings.PUBLIC_SURFACE_CACHE_S = 60
    _forget()
    r = redis_client()
    for key in r.scan_iter("inferwatch:ratelimit:*"):
        r.delete(key)
    yield settings
    for key in r.scan_iter("inferwatch:ratelimit:*"):
        r.delete(key)


def _forget() -> None:
    """Each test starts with nothing shared (what an earlier test left is not its flood's)."""
    for shared in (getattr(status_views, "_readiness", None),):
        if shared is not None:
            shared.clear()
    getattr(annotations, "_anonymous", {}).clear()


def _queries(call) -> int:
    with CaptureQueriesContext(connection) as queries:
        call()
    return len(queries)


def test_a_readyz_flood_checks_the_database_once(client, shared):
    answers = []
    spent = _queries(lambda: answers.extend(client.get("/readyz") for _ in range(20)))
    assert {a.status_code for a in answers} == {200}
    assert spent <= 1, spent


def test_grafanas_refreshes_share_one_answer(client, shared):
    ms = int(NOW.timestamp() * 1000)

    def refreshes() -> None:
        for i in range(20):  # each asks for a window a few ms later, as Grafana does
            answer = client.get(f"/metrics/alerts.json?from={ms - 3_600_000 + i}&to={ms + i}")
            assert answer.status_code == 200 and answer.json() == []

    once = _queries(lambda: client.get(f"/metrics/alerts.json?from={ms - 3_600_000}&to={ms}"))
    _forget()
    assert _queries(refreshes) <= once


def test_a_caller_naming_new_windows_is_rate_limited_unless_it_holds_the_token(client, shared):
    shared.RATE_LIMIT_PER_MINUTE = 3
    shared.METRICS_BEARER_TOKEN = TOKEN
    windows = [f"/metrics/alerts.json?from={i * 60_000}&to={i * 60_000 + 1}" for i in range(5)]

    answers = [client.get(url).status_code for url in windows]
    with_token = [
        client.get(url, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code for url in windows
    ]

    assert answers == [200, 200, 200, 429, 429]
    assert with_token == [200] * 5
    assert client.get("/metrics").status_code == 200  # the scrape itself is never counted
