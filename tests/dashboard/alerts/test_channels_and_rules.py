"""Channel configuration per kind, masking, and rule validation."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from dashboard.alerts import evaluator
from dashboard.alerts.models import AlertRule, Channel, Notification
from dashboard.alerts.transports import REGISTRY, Transport, get_transport
from dashboard.alerts.transports.http import mask_url


def test_every_registered_kind_imports_as_a_transport_of_that_kind():
    for kind in REGISTRY:
        transport = get_transport(kind)
        assert issubclass(transport, Transport) and transport.kind == kind


def test_an_unknown_kind_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown channel kind 'pager'"):
        get_transport("pager")


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://hooks.slack.com/services/T0/B0/XYZ", "https://hooks.slack.com/…"),
        ("https://example.com/hook?token=abc", "https://example.com/…"),
        ("http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
    ],
)
def test_webhook_urls_are_masked_down_to_their_host(url, masked):
    assert mask_url(url) == masked


def test_webhook_headers_are_secret_too():
    config = {"url": "https://example.com/h/tok", "headers": {"Authorization": "Bearer xyz"}}
    webhook = get_transport("webhook")
    assert webhook.masked_config(config) == {
        "url": "https://example.com/…",
        "headers": {"Authorization": "…"},
    }
    assert "Bearer xyz" in webhook.secret_values(config)


@pytest.mark.parametrize(
    ("kind", "config", "message"),
    [
        ("webhook", {}, '"url" is required'),
        ("webhook", {"url": "ftp://example.com/x"}, "Enter a valid URL."),
        ("webhook", {"url": "https://e.com/x", "headers": {"X": 1}}, "JSON object of strings"),
        ("slack", {"url": "https://e.com/x", "channel": "#a"}, "Unknown keys: channel"),
        ("email", {"to": []}, "at least one email address"),
        ("email", {"to": "a@example.com, nope"}, "'nope' is not an email address"),
        ("email", ["a@example.com"], "must be a JSON object"),
    ],
)
def test_a_bad_channel_config_is_rejected_with_what_is_wrong(db, kind, config, message):
    channel = Channel(name="x", kind=kind, config=config)
    with pytest.raises(ValidationError) as caught:
        channel.full_clean()
    assert message in str(caught.value)


def test_email_recipients_may_be_given_as_a_comma_separated_string(db):
    channel = Channel(name="x", kind="email", config={"to": "a@example.com; b@example.com"})
    channel.full_clean()
    assert channel.config == {"to": ["a@example.com", "b@example.com"]}


def test_a_rule_watches_an_endpoint_or_a_model_not_both(endpoint, llama):
    rule = AlertRule(name="r", endpoint=endpoint, canonical_model=llama)
    with pytest.raises(ValidationError, match="not both"):
        rule.full_clean()


def test_a_success_rate_threshold_is_a_fraction(db):
    rule = AlertRule(name="r", metric="success_rate", condition="threshold", threshold=95)
    with pytest.raises(ValidationError, match="fraction between 0 and 1"):
        rule.full_clean()


def test_a_threshold_rule_needs_its_threshold(db):
    rule = AlertRule(name="r", condition="threshold", threshold=None)
    with pytest.raises(ValidationError, match="needs a threshold"):
        rule.full_clean()


def test_a_notice_whose_enqueue_was_lost_is_queued_again_once(
    runs, make_rule, webhook, now, django_capture_on_commit_callbacks, monkeypatch
):
    sent = []
    monkeypatch.setattr(evaluator, "enqueue_delivery", lambda pk, countdown: sent.append(pk))
    rule = make_rule(channels=[webhook])
    runs.add(20, minutes_ago=120)
    runs.add(6, minutes_ago=5, ttft_ms=900.0)
    evaluator.evaluate_rule(rule, now)  # its on-commit enqueue never runs here: "lost"
    note = Notification.objects.get()

    assert evaluator.requeue_stalled(now + timedelta(minutes=1)) == 0  # too young
    assert evaluator.requeue_stalled(now + timedelta(minutes=20)) == 1
    assert evaluator.requeue_stalled(now + timedelta(minutes=21)) == 0  # claimed already
    assert sent == [note.pk]


def test_an_unknown_channel_kind_is_a_field_error_not_a_crash(db):
    with pytest.raises(ValidationError) as caught:
        Channel(name="x", kind="pager", config={}).full_clean()
    assert "kind" in caught.value.message_dict
