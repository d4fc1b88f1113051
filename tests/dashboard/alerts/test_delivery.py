"""Delivering notices through real transports: a local HTTP receiver and locmem email."""

import pytest
from django.core import mail

from dashboard.alerts import evaluator
from dashboard.alerts.delivery import deliver_notification
from dashboard.alerts.models import Channel, Notification

pytestmark = pytest.mark.django_db


@pytest.fixture
def firing(runs, make_rule, now):
    """A rule that fired for the slow endpoint; returns a function queuing its notices."""

    def fire_with(*channels):
        rule = make_rule(channels=list(channels))
        runs.add(20, minutes_ago=120, ttft_ms=200.0)
        runs.add(6, minutes_ago=5, ttft_ms=500.0)
        evaluator.evaluate_rule(rule, now)
        return list(Notification.objects.order_by("pk"))

    return fire_with


def test_it_posts_the_alert_as_json_to_a_webhook(firing, webhook, receiver, secret_token):
    [note] = firing(webhook)

    deliver_notification.apply(args=[note.pk])

    note.refresh_from_db()
    assert (note.status, note.attempts) == ("sent", 1)
    [request] = receiver.requests
    assert request["path"] == f"/hooks/{secret_token}"
    body = request["json"]
    assert (body["schema"], body["version"], body["state"]) == ("inferwatch.notice", 1, "firing")
    [alert] = body["alerts"]
    assert alert["metric"]["key"] == "ttft_ms"
    assert (alert["current"]["value"], alert["baseline"]["value"], alert["limit"]) == (
        500,
        200,
        300,
    )
    assert alert["change"] == {"pct": 150, "ratio": 2.5, "worse": True}
    assert alert["endpoint"]["provider"] == "Fastcloud"
    assert alert["workload"] == "short-chat"


def test_notices_link_to_the_site_when_site_url_is_set(firing, webhook, receiver, settings):
    settings.SITE_URL = "https://inferwatch.example.com"
    [note] = firing(webhook)

    deliver_notification.apply(args=[note.pk])

    body = receiver.requests[0]["json"]
    assert body["url"] == f"https://inferwatch.example.com/alerts/{note.event_id}/"
    endpoint_id = body["alerts"][0]["endpoint"]["id"]
    assert (
        body["alerts"][0]["endpoint_url"]
        == f"https://inferwatch.example.com/endpoints/{endpoint_id}/"
    )


def test_it_sends_slack_text_to_a_slack_compatible_webhook(firing, receiver, db):
    slack = Channel.objects.create(name="#oncall", kind="slack", config={"url": receiver.url})
    [note] = firing(slack)

    deliver_notification.apply(args=[note.pk])

    text = receiver.requests[0]["json"]["text"]
    assert text.startswith("*[Inferwatch] FIRING: TTFT regression")
    assert "500 ms" in text and "300 ms" in text


def test_it_emails_the_alert(firing, mailbox_channel):
    [note] = firing(mailbox_channel)

    deliver_notification.apply(args=[note.pk])

    [email] = mail.outbox
    assert email.to == ["oncall@example.com"]
    assert email.subject.startswith("[Inferwatch] FIRING: TTFT regression")
    assert "Now: 500 ms (median of 6 runs" in email.body
    assert "Baseline: 200 ms (median of 20 runs)" in email.body
    assert "Change: +150 % (×2.50 the baseline)" in email.body
    assert Notification.objects.get().status == "sent"


def test_a_gone_webhook_disables_the_channel_for_good(firing, webhook, receiver):
    receiver.answer(410)
    [note] = firing(webhook)

    deliver_notification.apply(args=[note.pk])

    note.refresh_from_db()
    webhook.refresh_from_db()
    assert (note.status, note.attempts) == ("failed", 1)  # not retried
    assert len(receiver.requests) == 1
    assert not webhook.enabled
    assert webhook.disabled_reason == "HTTP 410: the receiver refused the notice"
    assert webhook.last_error_at is not None


def test_a_disabled_channel_gets_no_further_notices(firing, webhook, receiver):
    [note] = firing(webhook)
    webhook.enabled = False
    webhook.save()

    deliver_notification.apply(args=[note.pk])

    note.refresh_from_db()
    assert (note.status, note.error) == ("failed", "channel disabled")
    assert receiver.requests == []


def test_a_server_error_is_retried_until_it_goes_through(firing, webhook, receiver):
    receiver.answer(503, 500, 200)
    [note] = firing(webhook)

    deliver_notification.apply(args=[note.pk])

    note.refresh_from_db()
    webhook.refresh_from_db()
    assert (note.status, note.attempts) == ("sent", 3)
    assert [a["ok"] for a in note.attempt_log] == [False, False, True]
    assert note.attempt_log[0]["error"] == "HTTP 503"
    assert webhook.enabled  # transient errors never switch a channel off
    assert webhook.last_error == "HTTP 500"


def test_after_the_last_retry_the_channel_is_switched_off_and_says_why(
    firing, webhook, receiver, settings
):
    settings.ALERTS_MAX_RETRIES = 3
    receiver.answer(502)
    [note] = firing(webhook)

    deliver_notification.apply(args=[note.pk])

    note.refresh_from_db()
    webhook.refresh_from_db()
    assert note.status == "failed"
    assert note.attempts == 4 and len(receiver.requests) == 4
    assert not webhook.enabled
    assert webhook.disabled_reason == "4 attempts failed, last: HTTP 502"


def test_an_unreachable_webhook_is_retried_and_its_url_never_logged(
    firing, db, caplog, receiver, secret_token
):
    host, port = receiver.server.server_address[:2]
    receiver.server.shutdown()
    receiver.server.server_close()  # nothing listens on the port any more
    dead = Channel.objects.create(
        name="Dead", kind="webhook", config={"url": f"http://{host}:{port}/x/{secret_token}"}
    )
    [note] = firing(dead)

    deliver_notification.apply(args=[note.pk])

    note.refresh_from_db()
    assert note.status == "failed"
    assert note.error == "connection failed (ConnectError)"
    assert secret_token not in caplog.text
    assert secret_token not in str(note.attempt_log)


def test_a_redelivered_task_does_not_send_twice(firing, webhook, receiver):
    [note] = firing(webhook)

    deliver_notification.apply(args=[note.pk])
    deliver_notification.apply(args=[note.pk])

    assert len(receiver.requests) == 1


def test_a_deleted_notification_is_skipped(db):
    assert deliver_notification.apply(args=[987654]).get() == "missing"


def test_a_resolved_alert_sends_a_resolved_notice(firing, webhook, receiver, runs, now):
    from datetime import timedelta

    [note] = firing(webhook)
    deliver_notification.apply(args=[note.pk])
    runs.add(6, minutes_ago=-35, ttft_ms=210.0)
    evaluator.evaluate_all(now + timedelta(minutes=40))

    resolved = Notification.objects.get(transition="resolved")
    deliver_notification.apply(args=[resolved.pk])

    body = receiver.requests[-1]["json"]
    assert body["state"] == "resolved"
    assert body["alerts"][0]["current"]["value"] == 210
    assert body["alerts"][0]["fired_value"] == 500
