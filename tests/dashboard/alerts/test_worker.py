"""End to end through a real Celery worker: evaluate, commit, enqueue, deliver."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, Notification
from dashboard.alerts.tasks import evaluate_alert_rules
from dashboard.celery import app as celery_app

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def celery_worker_process(tmp_path):
    """A worker on the test database and this session's broker, stopped afterwards."""
    celery_app.control.purge()  # no stale messages from an earlier run
    db = connection.settings_dict
    host = quote(db["HOST"] or "127.0.0.1", safe="")  # a unix socket path is percent-encoded
    port = f":{db['PORT']}" if db["PORT"] else ""
    env = os.environ | {
        "INFERWATCH_ENV": "test",
        "DATABASE_URL": f"postgresql://{db['USER']}@{host}{port}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "PYTHONUNBUFFERED": "1",
    }
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


def wait_for(condition, timeout_s: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def test_a_worker_evaluates_and_delivers_to_a_webhook(
    celery_worker_process, runs_until, make_rule, webhook, receiver
):
    proc, log_path = celery_worker_process
    runs = runs_until(timezone.now())
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    runs.add(6, minutes_ago=5, ttft_ms=700.0)
    make_rule(channels=[webhook])

    evaluate_alert_rules.delay()

    delivered = wait_for(lambda: receiver.requests)
    assert delivered, f"no webhook call; worker log:\n{log_path.read_text()[-3000:]}"
    assert receiver.requests[0]["json"]["state"] == "firing"
    assert AlertEvent.objects.get().recent_value == 700
    assert wait_for(lambda: Notification.objects.get().status == "sent", 10)
    assert proc.poll() is None
