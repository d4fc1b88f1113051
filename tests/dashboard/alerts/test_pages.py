"""The /alerts/ page, the endpoint partial, and what the admin shows (never secrets)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.template.loader import render_to_string
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, Channel, Notification
from dashboard.alerts.queries import active_alerts_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def make_event(make_rule, endpoint, workload):
    rule = make_rule()

    def make(**fields) -> AlertEvent:
        started = timezone.now() - timedelta(minutes=42)
        values = {
            "rule": rule,
            "rule_name": rule.name,
            "condition_label": rule.condition_label,
            "metric": "ttft_ms",
            "endpoint": endpoint,
            "workload": workload,
            "region": "eu-west",
            "started_at": started,
            "recent_value": 512.0,
            "recent_samples": 9,
            "baseline_value": 201.0,
            "baseline_samples": 120,
            "limit_value": 301.5,
        }
        return AlertEvent.objects.create(**(values | fields))

    return make


@pytest.fixture
def admin_client(client, db):
    user = User.objects.create_superuser("admin", "admin@example.com", "pw-for-tests-only")
    client.force_login(user)
    return client


def test_the_alerts_page_explains_how_to_add_a_rule_when_there_are_none(client):
    response = client.get("/alerts/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "Nothing is firing." in html
    assert "Setting up alerts" in html
    assert 'href="/admin/alerts/alertrule/add/"' in html
    assert 'href="/admin/alerts/channel/add/"' in html


def test_the_alerts_page_shows_firing_alerts_before_history(
    client, make_event, webhook, secret_token
):
    make_event(
        region="us-east",
        started_at=timezone.now() - timedelta(days=2),
        resolved_at=timezone.now() - timedelta(days=2) + timedelta(minutes=20),
        resolved_value=205.0,
        resolution="recovered",
    )
    make_event()

    html = client.get("/alerts/").content.decode()

    assert html.index("Firing now (1)") < html.index("Resolved in the last 30 days")
    firing_row = html[html.index("Firing now") : html.index("Resolved in the last")]
    assert "Fastcloud · llama-3.3-70b" in firing_row
    assert "short-chat · eu-west" in firing_row
    assert "now 512 ms" in firing_row
    assert "limit 302 ms" in firing_row and "baseline 201 ms" in firing_row
    assert "for 42" in firing_row  # minutes, since when
    history = html[html.index("Resolved in the last") :]
    assert "back to 205 ms" in history and "us-east" in history
    assert "Setting up alerts" not in html
    assert secret_token not in html


def test_the_endpoint_partial_lists_only_that_endpoints_open_alerts(
    make_event, endpoint, other_endpoint
):
    make_event()
    make_event(endpoint=other_endpoint, rule_name="Other rule")
    make_event(rule_name="Old one", resolved_at=timezone.now(), resolved_value=200.0)

    html = render_to_string("alerts/partials/active.html", {"endpoint": endpoint})

    assert "Active alerts" in html
    assert "TTFT regression" in html and "512 ms" in html
    assert "Other rule" not in html and "Old one" not in html
    assert [e.rule_name for e in active_alerts_for(endpoint)] == ["TTFT regression"]


def test_the_endpoint_partial_renders_nothing_without_alerts(endpoint):
    assert render_to_string("alerts/partials/active.html", {"endpoint": endpoint}).strip() == ""


def test_webhook_secrets_never_appear_in_the_admin(admin_client, receiver, webhook, secret_token):
    webhook.last_error = "HTTP 500"
    webhook.save()
    pages = [
        "/admin/alerts/channel/",
        f"/admin/alerts/channel/{webhook.pk}/change/",
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200
        html = response.content.decode()
        assert secret_token not in html, page
        assert "http://127.0.0.1:" in html  # the masked target still says where it goes


def test_a_disabled_channel_shows_why_in_the_admin_list(admin_client, webhook):
    webhook.record_error("HTTP 410: the receiver refused the notice", permanent=True)

    html = admin_client.get("/admin/alerts/channel/").content.decode()

    assert "disabled: HTTP 410: the receiver refused the notice" in html


def test_saving_a_channel_without_new_config_keeps_the_secret_url(admin_client, webhook, receiver):
    response = admin_client.post(
        f"/admin/alerts/channel/{webhook.pk}/change/",
        {"name": "Renamed", "kind": "webhook", "enabled": "on", "config": ""},
    )

    assert response.status_code == 302
    webhook.refresh_from_db()
    assert webhook.name == "Renamed"
    assert webhook.config["url"] == receiver.url


def test_the_channel_form_rejects_a_bad_config_with_a_clear_message(admin_client):
    response = admin_client.post(
        "/admin/alerts/channel/add/",
        {"name": "Mail", "kind": "email", "enabled": "on", "config": '{"to": ["nope"]}'},
    )

    assert response.status_code == 200
    assert "&#x27;nope&#x27; is not an email address." in response.content.decode()
    assert not Channel.objects.exists()


def test_the_test_action_reports_success(admin_client, webhook, receiver):
    response = admin_client.post(
        "/admin/alerts/channel/",
        {"action": "send_test_notification", "_selected_action": [webhook.pk]},
        follow=True,
    )

    assert "On-call hook: test notification sent." in response.content.decode()
    body = receiver.requests[0]["json"]
    assert (body["schema"], body["state"], body["alerts"]) == ("inferwatch.notice", "test", [])
    assert body["channel"] == "On-call hook"
    assert Notification.objects.get().status == "sent"


def test_the_test_action_reports_failure_without_the_secret(
    admin_client, webhook, receiver, secret_token
):
    receiver.answer(404)

    response = admin_client.post(
        "/admin/alerts/channel/",
        {"action": "send_test_notification", "_selected_action": [webhook.pk]},
        follow=True,
    )

    html = response.content.decode()
    assert "On-call hook: delivery failed — HTTP 404: the receiver refused the notice" in html
    assert secret_token not in html
    webhook.refresh_from_db()
    assert webhook.enabled  # a test never switches a channel off


def test_events_and_notifications_are_read_only_in_the_admin(admin_client, make_event):
    event = make_event()

    assert admin_client.get("/admin/alerts/alertevent/").status_code == 200
    assert admin_client.get("/admin/alerts/notification/").status_code == 200
    assert admin_client.get("/admin/alerts/alertevent/add/").status_code == 403
    change = admin_client.get(f"/admin/alerts/alertevent/{event.pk}/change/")
    assert change.status_code == 200
    assert 'name="_save"' not in change.content.decode()


def test_the_rule_admin_lists_rules_with_their_condition(admin_client, make_rule, llama):
    make_rule(name="Model watch", canonical_model=llama)

    html = admin_client.get("/admin/alerts/alertrule/").content.decode()

    assert "all endpoints of Llama 3.3 70B" in html
    assert "worse than its 24 h baseline by more than 50 %" in html


def test_the_admin_adds_silences_and_rules_with_their_new_settings(admin_client, endpoint):
    for page in ("/admin/alerts/alertrule/add/", "/admin/alerts/silence/add/"):
        assert admin_client.get(page).status_code == 200
    rule_form = admin_client.get("/admin/alerts/alertrule/add/").content.decode()
    for field in ("pending_for_min", "resolve_margin_pct", "repeat_every_min", "max_p_value"):
        assert f'name="{field}"' in rule_form
    response = admin_client.post(
        "/admin/alerts/silence/add/",
        {
            "provider": endpoint.provider.pk,
            "starts_at_0": "2026-01-01",
            "starts_at_1": "00:00:00",
            "ends_at_0": "2025-01-01",
            "ends_at_1": "00:00:00",
            "reason": "maintenance",
        },
    )
    assert "A silence ends after it starts." in response.content.decode()


def test_a_new_channels_form_opens_empty_and_its_help_reads_plainly(admin_client):
    """Issue 34 item 8: the box was pre-filled `null` and the examples read `\\u2026`."""
    html = admin_client.get("/admin/alerts/channel/add/").content.decode()
    box = html[html.index('name="config"') :]
    box = box[box.index(">") + 1 : box.index("</textarea>")]
    assert box.strip() == ""
    assert "\\u2026" not in html and '"secret": "…"' in html.replace("&quot;", '"')


def test_a_silenced_alert_says_so_on_its_page_and_in_the_list(client, make_event):
    event = make_event(state="firing", silenced=True)
    title = client.get(f"/alerts/{event.pk}/").content.decode()
    title = title[title.index('id="alert-title"') : title.index("</h1>")]
    assert "firing" in title and "silenced" in title
    row = client.get("/alerts/").content.decode()
    row = row[row.index(f'data-event="{event.pk}"') :]
    assert "silenced" in row[: row.index("</tr>")]
