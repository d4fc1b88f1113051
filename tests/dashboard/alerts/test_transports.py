"""Transports: one registry, signed webhooks, Discord embeds, PagerDuty events, bounded
requests, and secrets that nobody sees again — whatever their admin permissions."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth.models import Permission, User

from dashboard.alerts import evaluator
from dashboard.alerts.models import Channel, Notification
from dashboard.alerts.tasks import deliver_notification
from dashboard.alerts.transports import REGISTRY, get_transport, kind_choices
from dashboard.alerts.transports.base import TransportError
from dashboard.alerts.transports.http import bounded_post
from dashboard.alerts.transports.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature

pytestmark = pytest.mark.django_db


@pytest.fixture
def fire(runs, make_rule, now):
    def fire_with(*channels) -> Notification:
        rule = make_rule(channels=list(channels))
        runs.add(20, minutes_ago=120, ttft_ms=200.0)
        runs.add(6, minutes_ago=5, ttft_ms=500.0)
        evaluator.evaluate_rule(rule, now)
        return Notification.objects.get()

    return fire_with


def test_the_kinds_people_choose_from_are_the_registry():
    assert [kind for kind, _ in kind_choices()] == list(REGISTRY)
    assert {get_transport(kind).kind for kind in REGISTRY} == set(REGISTRY)
    assert dict(kind_choices())["discord"] == "Discord webhook"


def test_a_signed_webhook_carries_an_hmac_a_receiver_can_verify(fire, receiver):
    secret = "s" * 24
    hook = Channel.objects.create(
        name="Signed", kind="webhook", config={"url": receiver.url, "secret": secret}
    )
    note = fire(hook)

    deliver_notification.apply(args=[note.pk])

    [request] = receiver.requests
    timestamp = request["headers"][TIMESTAMP_HEADER]
    assert abs(int(timestamp) - time.time()) < 60
    assert request["headers"][SIGNATURE_HEADER] == signature(secret, timestamp, request["body"])
    assert request["headers"][SIGNATURE_HEADER] != signature(
        "wrong" * 5, timestamp, request["body"]
    )
    assert hook.masked_config["secret"] == "…" and secret not in hook.target


def test_discord_gets_native_embeds(fire, receiver):
    discord = Channel.objects.create(name="Discord", kind="discord", config={"url": receiver.url})
    note = fire(discord)

    deliver_notification.apply(args=[note.pk])

    body = receiver.requests[0]["json"]
    [embed] = body["embeds"]
    assert embed["title"] == "FIRING: TTFT regression"
    assert embed["color"] == 0xD93025
    assert "Fastcloud" in embed["description"] and "500 ms" in embed["description"]
    assert body["allowed_mentions"] == {"parse": []}


def test_pagerduty_triggers_and_resolves_one_incident_per_alert(fire, receiver, runs, now):
    key = "R" * 32
    pager = Channel.objects.create(
        name="PD", kind="pagerduty", config={"routing_key": key, "url": receiver.url}
    )
    note = fire(pager)
    deliver_notification.apply(args=[note.pk])
    runs.add(6, minutes_ago=-35, ttft_ms=200.0)
    evaluator.evaluate_all(now + timedelta(minutes=40))
    deliver_notification.apply(args=[Notification.objects.get(transition="resolved").pk])

    trigger, resolve = (r["json"] for r in receiver.requests)
    assert trigger["event_action"] == "trigger" and resolve["event_action"] == "resolve"
    assert trigger["routing_key"] == key
    assert trigger["dedup_key"] == resolve["dedup_key"] == f"inferwatch-{note.event_id}"
    assert trigger["payload"]["source"] == "Fastcloud"
    assert (
        "FIRING" not in trigger["payload"]["summary"] and "500 ms" in trigger["payload"]["summary"]
    )
    assert pager.masked_config == {
        "routing_key": "…",
        "url": receiver.url.split("/hooks")[0] + "/…",
    }


def test_opsgenie_creates_then_closes_one_alert_per_alert(fire, receiver, runs, now):
    key = "K" * 36
    base = receiver.url.split("/hooks")[0]
    genie = Channel.objects.create(name="OG", kind="opsgenie", config={"api_key": key, "url": base})
    note = fire(genie)
    deliver_notification.apply(args=[note.pk])
    runs.add(6, minutes_ago=-35, ttft_ms=200.0)
    evaluator.evaluate_all(now + timedelta(minutes=40))
    deliver_notification.apply(args=[Notification.objects.get(transition="resolved").pk])

    create, close = receiver.requests
    alias = f"inferwatch-{note.event_id}"
    assert create["path"] == "/v2/alerts" and create["json"]["alias"] == alias
    assert create["headers"]["Authorization"] == f"GenieKey {key}"
    assert close["path"] == f"/v2/alerts/{alias}/close?identifierType=alias"
    assert key not in genie.target and genie.masked_config["api_key"] == "…"


class Stubborn:
    """A receiver that answers 200 and then never stops (or sends a huge body)."""

    def __init__(self, mode: str) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.end_headers()
                try:
                    for _ in range(100_000):
                        if mode == "slow":  # a trickle: never enough to hit the size cap
                            self.wfile.write(b"x" * 100)
                            self.wfile.flush()
                            time.sleep(0.2)
                        else:
                            self.wfile.write(b"x" * 65536)
                except OSError:
                    pass  # the client hung up, as it should

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"


@pytest.fixture
def stubborn() -> Iterator:
    made = []

    def make(mode):
        made.append(Stubborn(mode))
        return made[-1]

    yield make
    for s in made:
        s.server.shutdown()
        s.server.server_close()


def test_a_receiver_that_never_stops_answering_is_cut_off_in_time(stubborn):
    server = stubborn("slow")
    started = time.monotonic()
    with pytest.raises(TransportError, match="timed out after 1 s"):
        bounded_post(server.url, b"{}", {}, total_s=1.0)
    assert time.monotonic() - started < 3


def test_a_huge_answer_is_read_only_up_to_the_cap(stubborn):
    server = stubborn("huge")
    status, body = bounded_post(server.url, b"{}", {}, total_s=10.0, max_bytes=100_000)
    assert status == 200 and len(body) == 100_000


@pytest.fixture
def viewer(client, db) -> User:
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_channel"),
        Permission.objects.get(codename="view_alertrule"),
    )
    client.force_login(user)
    return user


def test_view_only_staff_never_see_a_channels_stored_url_or_secret(
    client, viewer, webhook, secret_token
):
    for page in ("/admin/alerts/channel/", f"/admin/alerts/channel/{webhook.pk}/change/"):
        response = client.get(page)
        assert response.status_code == 200
        html = response.content.decode()
        assert secret_token not in html, page
        assert "127.0.0.1" in html  # the masked target: host only


def test_sending_a_test_notification_needs_the_change_permission(client, viewer, webhook, receiver):
    client.post(
        "/admin/alerts/channel/",
        {"action": "send_test_notification", "_selected_action": [webhook.pk]},
    )
    assert receiver.requests == []
    assert not Notification.objects.exists()

    viewer.user_permissions.add(Permission.objects.get(codename="change_channel"))
    client.post(
        "/admin/alerts/channel/",
        {"action": "send_test_notification", "_selected_action": [webhook.pk]},
    )
    assert len(receiver.requests) == 1
