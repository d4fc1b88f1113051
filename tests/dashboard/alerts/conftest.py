"""Fixtures for alert tests: a small catalog, ProbeRun factories, a real webhook receiver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection

from dashboard.alerts.models import AlertRule, Channel
from dashboard.celery import app as celery_app
from probes.models import CanonicalModel, Endpoint, ProbeRun, Provider, Workload
from probes.platform.redis_client import redis_client
from tests.conftest import ROOT

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
SECRET_TOKEN = "T0KEN-s3cr3t-abcdef"


@pytest.fixture
def now() -> datetime:
    return NOW


@pytest.fixture
def secret_token() -> str:
    """The token inside the test webhook URLs: it must never show up anywhere."""
    return SECRET_TOKEN


@pytest.fixture
def llama(db) -> CanonicalModel:
    return CanonicalModel.objects.create(name="Llama 3.3 70B", slug="llama-3-3-70b")


def make_endpoint(model: CanonicalModel, provider_name: str, model_id: str) -> Endpoint:
    provider, _ = Provider.objects.get_or_create(
        name=provider_name,
        defaults={"slug": provider_name.lower(), "base_url": "http://127.0.0.1:9/v1"},
    )
    return Endpoint.objects.create(provider=provider, model_id=model_id, canonical_model=model)


@pytest.fixture
def endpoint(llama) -> Endpoint:
    return make_endpoint(llama, "Fastcloud", "llama-3.3-70b")


@pytest.fixture
def other_endpoint(llama) -> Endpoint:
    return make_endpoint(llama, "Slowcloud", "meta-llama/Llama-3.3-70B")


@pytest.fixture
def workload(db) -> Workload:
    return Workload.objects.create(
        slug="short-chat", name="Short chat", messages=[{"role": "user", "content": "Hi"}]
    )


class Runs:
    """Creates ProbeRun rows: `runs.add(5, minutes_ago=10, ttft_ms=200)`."""

    def __init__(self, endpoint: Endpoint, workload: Workload, now: datetime) -> None:
        self.endpoint, self.workload, self.now = endpoint, workload, now

    def add(
        self,
        count: int,
        *,
        minutes_ago: float,
        endpoint: Endpoint | None = None,
        region: str = "local",
        status: str = "ok",
        **metrics,
    ) -> list[ProbeRun]:
        values = {"ttft_ms": 200.0, "ttfat_ms": 210.0, "e2e_ms": 1500.0, "output_tps": 400.0}
        if status != "ok":
            values = dict.fromkeys(values)
        values.update(metrics)
        return ProbeRun.objects.bulk_create(
            ProbeRun(
                endpoint=endpoint or self.endpoint,
                workload=self.workload,
                region=region,
                # Spread over a minute so windows are not hit on an exact boundary.
                started_at=self.now - timedelta(minutes=minutes_ago, seconds=i),
                status=status,
                methodology_version="test",
                output_tokens=500 if status == "ok" else None,
                **values,
            )
            for i in range(count)
        )


@pytest.fixture
def runs(endpoint, workload, now) -> Runs:
    return Runs(endpoint, workload, now)


@pytest.fixture
def runs_until(endpoint, workload):
    """Runs relative to another moment (e.g. the real clock, for a worker)."""
    return lambda moment: Runs(endpoint, workload, moment)


@pytest.fixture
def make_rule(db):
    def make(**fields) -> AlertRule:
        defaults = {
            "name": "TTFT regression",
            "metric": "ttft_ms",
            "condition": "regression",
            "regression_pct": 50,
            "recent_window_min": 30,
            "baseline_window_h": 24,
            "min_samples": 5,
            "min_baseline_samples": 20,
        }
        channels = fields.pop("channels", [])
        rule = AlertRule.objects.create(**(defaults | fields))
        rule.channels.set(channels)
        return rule

    return make


class Receiver:
    """A real HTTP server on 127.0.0.1 that records POSTs and answers with scripted codes
    (the last code repeats)."""

    def __init__(self, codes: list[int]) -> None:
        self.codes = list(codes)
        self.requests: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": body,
                        "json": json.loads(body),
                    }
                )
                code = receiver.codes.pop(0) if len(receiver.codes) > 1 else receiver.codes[0]
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/hooks/{SECRET_TOKEN}"

    def answer(self, *codes: int) -> None:
        self.codes = list(codes)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver([200])
    receiver.thread.start()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


@pytest.fixture
def webhook(db, receiver) -> Channel:
    return Channel.objects.create(name="On-call hook", kind="webhook", config={"url": receiver.url})


@pytest.fixture
def mailbox_channel(db) -> Channel:
    return Channel.objects.create(
        name="On-call mail", kind="email", config={"to": ["oncall@example.com"]}
    )


# -- a real Celery worker ---------------------------------------------------------------------


@pytest.fixture
def worker_env() -> dict[str, str]:
    """Extra environment for the worker (tests override it, e.g. with SMTP settings)."""
    return {}


@pytest.fixture
def celery_worker_process(tmp_path, worker_env):
    """A worker on the test database and this session's broker, stopped afterwards."""
    celery_app.control.purge()  # no stale messages from an earlier run
    db = connection.settings_dict
    host = quote(db["HOST"] or "127.0.0.1", safe="")  # a unix socket path is percent-encoded
    port = f":{db['PORT']}" if db["PORT"] else ""
    env = (
        os.environ
        | {
            "INFERWATCH_ENV": "test",
            "DATABASE_URL": f"postgresql://{db['USER']}@{host}{port}/{db['NAME']}",
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
            "PYTHONUNBUFFERED": "1",
            # Compressed time: group for 1 s, retry after 0.2 s, 0.4 s.
            "ALERTS_GROUP_WAIT_S": "1",
            "ALERTS_RETRY_BASE_S": "0.2",
            "ALERTS_MAX_RETRIES": "2",
            # in_worker() waits for Celery's per-task "succeeded" line: off below DEBUG.
            "LOG_LEVEL": "DEBUG",
        }
        | worker_env
    )
    log = (tmp_path / "worker.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-P", "solo", "-Q",
         "celery", "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    yield proc, tmp_path / "worker.log"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
    # What the worker left in this session's Redis DB (semaphores, heartbeats, queued
    # retries) would otherwise read as a silent worker to later tests of /status.
    redis_client().flushdb()


def wait_for(condition, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False
