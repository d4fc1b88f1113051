"""One door in (issue 24, item 2): a run stores our verdict, and a secret is never stored.

A real loopback server plays the provider and an internal server; the slot runs the
whole path (engine, recorder, real Postgres and Redis) and the pages and the public API
are read as an anonymous visitor through the Django test client:

- an internal 403 page ("db_password=...") is kept for staff, never shown publicly;
- a non-Prometheus /metrics body is never quoted on the run or endpoint page;
- a key echoed as a JSON object key (usage, time_info) or as finish_reason is replaced
  before the row is written, whichever live secret it is (the probe's stored key, an
  extra header value, another provider's environment key).
"""

from __future__ import annotations

import orjson
import pytest
from django.contrib.auth.models import User
from django.db import connection

from probes.engine import reasons
from probes.models import ProbeRun
from probes.slots import run as runner
from tests.probes.engine import hostile

pytestmark = pytest.mark.django_db

INTERNAL_PAGE = b"<html><body><h1>Forbidden</h1><pre>db_password=Hunter2-internal</pre></body>"
METRICS_BODY = b"invalid metric name: secret-role-name{role=admin} INTERNAL-SECRET-9f8e\n"
KEY = "sk-echoed-key-0123456789"
HEADER_TOKEN = "tenant-token-987654321"
ENV_KEY = "env-other-key-55aa66bb77"

PUBLIC_RUN_URLS = ("/api/v1/runs", "/api/v1/runs.csv", "/api/v1/runs?format=csv")


def _public_pages(client, run: ProbeRun) -> dict[str, str]:
    urls = [
        f"/runs/{run.pk}/",
        f"/endpoints/{run.endpoint_id}/",
        *PUBLIC_RUN_URLS,
        f"/api/v1/series?endpoint={run.endpoint_id}",
        "/metrics",
        "/",
    ]
    pages = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code in (200, 404), (url, response.status_code)
        pages[url] = b"".join(response) if response.streaming else response.content
    return {url: body.decode("utf-8", "replace") for url, body in pages.items()}


def _stored_row(run: ProbeRun) -> str:
    """The whole row as Postgres holds it, every column as text."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT row_to_json(r)::text FROM probes_proberun r WHERE id = %s", [run.pk])
        return cursor.fetchone()[0]


def test_an_internal_403_page_is_kept_for_staff_never_shown_publicly(probe, server, client):
    server.on_post = hostile.answer(
        b"HTTP/1.1 403 Forbidden\r\ncontent-type: text/html\r\n"
        + f"content-length: {len(INTERNAL_PAGE)}\r\n\r\n".encode()
        + INTERNAL_PAGE
    )

    outcome = runner.run_slot(probe, None, "door@host", "local")

    run = ProbeRun.objects.get(run_group=outcome.run_group)
    assert (run.status, run.http_status, run.reason) == ("auth_error", 403, "key_refused")
    assert "db_password" in run.error  # kept for staff, length-capped
    for url, body in _public_pages(client, run).items():
        assert "db_password" not in body and "Hunter2" not in body, url
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert reasons.label("key_refused") in page
    api_run = client.get("/api/v1/runs").json()["runs"][0]
    assert api_run["reason"] == "key_refused" and "error" not in api_run

    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert "db_password=Hunter2-internal" in client.get(f"/runs/{run.pk}/").content.decode()


def test_a_non_prometheus_metrics_body_is_never_quoted(probe, server, client):
    base = server.base_url.removesuffix("/v1")
    type(probe.endpoint).objects.filter(pk=probe.endpoint_id).update(
        server_metrics_url=f"{base}/metrics"
    )
    probe.refresh_from_db()

    def metrics(conn: hostile.Conn) -> bool:
        conn.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n"
            + f"content-length: {len(METRICS_BODY)}\r\n\r\n".encode()
            + METRICS_BODY
        )
        return True

    server.on_get = metrics

    outcome = runner.run_slot(probe, None, "door@host", "local")

    run = ProbeRun.objects.get(run_group=outcome.run_group)
    assert run.status == "ok", run.error
    errors = run.server_timing["metrics"]["errors"]
    assert errors and all("not in the expected format" in e for e in errors), errors
    assert "secret-role-name" not in _stored_row(run)
    for url, body in _public_pages(client, run).items():
        assert "secret-role-name" not in body and "INTERNAL-SECRET" not in body, url


def test_a_secret_echoed_as_a_json_key_or_finish_reason_is_never_stored(
    probe, server, client, monkeypatch
):
    monkeypatch.setenv("OTHER_API_KEY", ENV_KEY)  # another provider's key, from the env
    provider = probe.endpoint.provider
    provider.requires_key = True
    provider.set_api_key(KEY)
    provider.extra_headers = {"X-Tenant": HEADER_TOKEN}
    provider.save()
    probe.refresh_from_db()
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hello there"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": KEY}]},
        {
            "choices": [],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, KEY: 1, HEADER_TOKEN: {}},
            "time_info": {ENV_KEY: 0.5, "queue_time": 0.001, "nested": [{KEY: HEADER_TOKEN}]},
        },
    ]
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    server.on_post = hostile.answer(hostile.sse_response(body))

    outcome = runner.run_slot(probe, None, "door@host", "local")

    run = ProbeRun.objects.get(run_group=outcome.run_group)
    assert run.status == "ok", run.error
    row = _stored_row(run)
    for secret in (KEY, HEADER_TOKEN, ENV_KEY):
        assert secret not in row, secret
    assert run.finish_reason == "[redacted]"
    assert "[redacted]" in run.usage and run.usage["prompt_tokens"] == 3
    assert "[redacted]" in run.server_timing["time_info"]
    for url, body in _public_pages(client, run).items():
        for secret in (KEY, HEADER_TOKEN, ENV_KEY):
            assert secret not in body, (url, secret)


def test_notes_stored_before_they_were_ours_are_not_shown_to_visitors(probe, server, client):
    outcome = runner.run_slot(probe, None, "door@host", "local")
    quoted = "server metrics: MetricsError: invalid metric name: secret-role-name"
    ProbeRun.objects.filter(run_group=outcome.run_group).update(
        server_timing={"metrics": {"errors": [quoted, "power: timed out"]}}
    )
    type(probe.endpoint).objects.filter(pk=probe.endpoint_id).update(
        server_metrics_url="http://127.0.0.1:9/metrics"
    )
    run = ProbeRun.objects.get(run_group=outcome.run_group)

    for url in (f"/runs/{run.pk}/", f"/endpoints/{run.endpoint_id}/"):
        page = client.get(url).content.decode()
        assert "secret-role-name" not in page, url
        assert "server metrics: could not be read" in page and "power: timed out" in page, url

    client.force_login(User.objects.create_user("staff", password="pw", is_staff=True))
    assert "secret-role-name" in client.get(f"/runs/{run.pk}/").content.decode()
