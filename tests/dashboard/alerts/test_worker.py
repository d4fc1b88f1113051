"""End to end through a real Celery worker: evaluate, commit, enqueue, deliver."""

from __future__ import annotations

import pytest
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, Notification
from dashboard.alerts.tasks import evaluate_alert_rules
from tests.dashboard.alerts.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


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
