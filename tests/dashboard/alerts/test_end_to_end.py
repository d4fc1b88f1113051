"""Alerts end to end: the simulator, a real Celery worker, Postgres, a local webhook receiver
checking signatures, and a local SMTP server (aiosmtpd).

Time is compressed the only way it can be: runs are measured for real, then the ones that
stand for earlier hours are moved back in time (`backdate`), so a 5-minute window and a
1-hour baseline take seconds.
"""

from __future__ import annotations

import logging
import socket
from datetime import date, timedelta
from decimal import Decimal
from email import message_from_bytes, policy

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth.models import User
from django.db.models import F
from django.test import Client
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, AlertRule, Channel, Notification
from dashboard.alerts.tasks import evaluate_alert_rules
from dashboard.alerts.transports.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature
from probes.models import CanonicalModel, Endpoint, Price, Probe, ProbeRun, Provider, Workload
from probes.simulator import start_in_process
from probes.tasks import run_probe
from tests.counted_runs import counted
from tests.dashboard.alerts.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

HOOK_SECRET = "hmac-secret-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Mailbox:
    def __init__(self) -> None:
        self.messages = []

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's naming)
        self.messages.append(message_from_bytes(envelope.content, policy=policy.default))
        return "250 OK"


@pytest.fixture
def smtp():
    mailbox = Mailbox()
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield controller, mailbox
    controller.stop()


@pytest.fixture
def worker_env(smtp):
    controller, _ = smtp
    return {
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(controller.port),
        "EMAIL_USE_TLS": "false",
    }


@pytest.fixture(scope="module")
def sim():
    with start_in_process() as handle:
        yield handle


@pytest.fixture
def speed_workload(db) -> Workload:
    # Long enough an answer to count for speed (MIN_SPEED_TOKENS).
    return Workload.objects.create(
        slug="answer", name="Answer", messages=[{"role": "user", "content": "Go."}], max_tokens=300
    )


def make_sim_probe(sim, provider: Provider, workload: Workload, model: str, n: int) -> Probe:
    canonical, _ = CanonicalModel.objects.get_or_create(slug="m", defaults={"name": "M"})
    endpoint = Endpoint.objects.create(
        provider=provider, model_id=f"{model},seed={n}", canonical_model=canonical
    )
    Price.objects.create(
        endpoint=endpoint,
        effective_from=date(2020, 1, 1),
        input_per_m=Decimal("1"),
        output_per_m=Decimal("2"),
    )
    return Probe.objects.create(endpoint=endpoint, workload=workload, region="local")


def sim_provider(sim, name: str) -> Provider:
    return Provider.objects.create(
        name=name,
        slug=name.lower(),
        base_url=sim.base_url,
        requires_key=False,
        simulated=True,
        stall_timeout_s=2.0,
        first_token_timeout_s=5.0,
        total_timeout_s=10.0,
    )


def in_worker(log_path, task, *args) -> None:
    """Run a task in the worker and wait until the worker says it finished."""
    result = task.delay(*args)
    assert wait_for(lambda: f"[{result.id}] succeeded" in log_path.read_text(), 60), (
        log_path.read_text()[-3000:]
    )


def backdate(runs, minutes: float) -> None:
    ProbeRun.objects.filter(pk__in=[r.pk for r in runs]).update(
        started_at=F("started_at") - timedelta(minutes=minutes)
    )


def set_model(endpoint: Endpoint, profile: str) -> None:
    """The simulated provider changes its serving speed (or breaks)."""
    endpoint.model_id = f"{endpoint.model_id.split('@')[0]}@{profile},seed={endpoint.pk}"
    endpoint.save(update_fields=["model_id"])


def verified(request) -> dict:
    """The webhook's body, after checking its HMAC signature like a receiver would."""
    timestamp = request["headers"][TIMESTAMP_HEADER]
    expected = signature(HOOK_SECRET, timestamp, request["body"])
    assert request["headers"][SIGNATURE_HEADER] == expected
    return request["json"]


def test_a_provider_slowing_from_2000_to_1200_tok_s_fires_once_and_resolves_once(
    celery_worker_process, sim, smtp, receiver, speed_workload
):
    proc, log = celery_worker_process
    _, mailbox = smtp
    hook = Channel.objects.create(
        name="Hook", kind="webhook", config={"url": receiver.url, "secret": HOOK_SECRET}
    )
    mail = Channel.objects.create(name="Mail", kind="email", config={"to": ["oncall@example.com"]})
    probe = make_sim_probe(
        sim, sim_provider(sim, "Speedy"), speed_workload, "sim-fast@tps=2000,jitter=5", 1
    )
    rule = AlertRule.objects.create(
        name="Speed drop",
        endpoint=probe.endpoint,
        metric="output_tps",
        regression_pct=20,
        recent_window_min=5,
        baseline_window_h=1,
        min_samples=3,
        min_baseline_samples=12,
    )
    rule.channels.set([hook, mail])

    for _ in range(12):  # the last hour, at 2,000 tok/s
        counted(probe, in_worker, log, run_probe, probe.pk)
    baseline = list(ProbeRun.objects.all())
    assert {r.status for r in baseline} == {"ok"}
    backdate(baseline, 30)

    set_model(probe.endpoint, "tps=1200,jitter=5")
    for n in range(1, 4):
        counted(probe, in_worker, log, run_probe, probe.pk)
        in_worker(log, evaluate_alert_rules)
        # Fires at the first evaluation whose window holds three runs past the limit.
        assert AlertEvent.objects.filter(state="firing").count() == (1 if n == 3 else 0)

    event = AlertEvent.objects.get()
    assert 1000 < event.recent_value < 1400 and 1800 < event.baseline_value < 2200
    assert event.effect > 0.3 and "CUSUM" in event.condition_label  # the default test
    assert wait_for(lambda: len(receiver.requests) == 1 and len(mailbox.messages) == 1)
    assert verified(receiver.requests[0])["state"] == "firing"
    assert mailbox.messages[0]["Subject"].strip().startswith("[Inferwatch] FIRING: Speed drop")

    set_model(probe.endpoint, "tps=2000,jitter=5")
    backdate(ProbeRun.objects.filter(started_at__gt=event.started_at - timedelta(minutes=6)), 10)
    for _ in range(3):
        counted(probe, in_worker, log, run_probe, probe.pk)
    in_worker(log, evaluate_alert_rules)
    in_worker(log, evaluate_alert_rules)  # a second evaluation changes nothing

    event.refresh_from_db()
    assert event.state == "resolved"
    assert wait_for(lambda: len(receiver.requests) == 2 and len(mailbox.messages) == 2)
    assert verified(receiver.requests[1])["state"] == "resolved"
    assert mailbox.messages[1]["Subject"].strip().startswith("[Inferwatch] RESOLVED: Speed drop")
    assert wait_for(lambda: Notification.objects.filter(status="sent").count() == 4, 10)
    assert proc.poll() is None


def test_an_outage_across_12_endpoints_of_one_provider_is_one_message_each_way(
    celery_worker_process, sim, receiver, speed_workload
):
    _, log = celery_worker_process
    hook = Channel.objects.create(
        name="Hook", kind="webhook", config={"url": receiver.url, "secret": HOOK_SECRET}
    )
    provider = sim_provider(sim, "Flaky")
    probes = [
        make_sim_probe(sim, provider, speed_workload, "sim-fast@tps=3000", n) for n in range(12)
    ]
    rule = AlertRule.objects.create(
        name="Errors",
        metric="error_rate",
        condition="threshold",
        threshold=0.5,
        recent_window_min=5,
        min_samples=2,
    )
    rule.channels.set([hook])

    for probe in probes:
        set_model(probe.endpoint, "tps=3000,fault=server_error")
    for probe in probes * 2:
        counted(probe, in_worker, log, run_probe, probe.pk)
    in_worker(log, evaluate_alert_rules)

    assert AlertEvent.objects.filter(state="firing").count() == 12
    assert wait_for(lambda: Notification.objects.filter(status="sent").count() == 12)
    [message] = receiver.requests
    body = verified(message)
    assert body["state"] == "firing" and body["group"] == {"provider": "Flaky", "count": 12}
    assert len({a["endpoint"]["id"] for a in body["alerts"]}) == 12

    backdate(ProbeRun.objects.all(), 10)
    for probe in probes:
        set_model(probe.endpoint, "tps=3000")
    for probe in probes * 2:
        counted(probe, in_worker, log, run_probe, probe.pk)
    in_worker(log, evaluate_alert_rules)

    assert AlertEvent.objects.filter(state="resolved").count() == 12
    assert wait_for(lambda: len(receiver.requests) == 2)
    resolved = verified(receiver.requests[1])
    assert resolved["state"] == "resolved" and len(resolved["alerts"]) == 12


def test_a_dead_webhook_is_retried_then_switched_off_and_shown_while_mail_still_goes_out(
    celery_worker_process, smtp, receiver, runs_until, make_rule, secret_token
):
    _, log = celery_worker_process
    _, mailbox = smtp
    receiver.answer(503)
    dead = Channel.objects.create(name="Dead hook", kind="webhook", config={"url": receiver.url})
    mail = Channel.objects.create(name="Mail", kind="email", config={"to": ["oncall@example.com"]})
    runs = runs_until(timezone.now())
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    runs.add(6, minutes_ago=5, ttft_ms=700.0)
    make_rule(channels=[dead, mail])

    in_worker(log, evaluate_alert_rules)

    assert wait_for(lambda: len(mailbox.messages) == 1)
    assert wait_for(lambda: not Channel.objects.get(pk=dead.pk).enabled)
    assert len(receiver.requests) == 3  # the first try and ALERTS_MAX_RETRIES=2 retries
    dead.refresh_from_db()
    assert dead.disabled_reason == "3 attempts failed, last: HTTP 503"
    # Why a channel was switched off is for staff (the one door in): visitors see neither.
    visitor = Client().get("/alerts/").content.decode()
    assert "3 attempts failed" not in visitor and secret_token not in visitor
    staff = Client()
    staff.force_login(User.objects.create_user("oncall", is_staff=True))
    html = staff.get("/alerts/").content.decode()
    assert "Dead hook" in html and "3 attempts failed, last: HTTP 503" in html
    assert secret_token not in html
