"""One notice model (issue 34 item 1): a real 3× slowdown, measured from the simulator and
decided minute by minute as the evaluator does, reads ×3 on every surface — the webhook
(a real local receiver, checking the signature), the e-mail (a real local SMTP server,
aiosmtpd), the alert page and /alerts/ — and every notice, single, grouped or test, is an
instance of the one versioned schema the OpenAPI document serves.

Before, the CUSUM fired at the third slow run, when the ten-run window's median was still
the old level: the webhook said "204 ms past 300 ms" and the page "2 % worse".
"""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta
from email import message_from_bytes, policy

import jsonschema
import pytest
from aiosmtpd.controller import Controller
from django.utils import timezone

from dashboard.alerts import evaluator
from dashboard.alerts.delivery import deliver_notification
from dashboard.alerts.demo import DEMO_RULE, DEMO_WORKLOAD
from dashboard.alerts.messages import notice_message
from dashboard.alerts.models import AlertEvent, AlertRule, Channel, Notification
from dashboard.alerts.notice_schema import json_schema
from dashboard.alerts.transports.webhook import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature
from probes.catalog.loader import load_demo
from probes.models import ProbeRun, Workload
from probes.recording import recorder
from probes.simulator import start_in_process
from tests.browser_page import CHROMIUM, chromium_page
from tests.dashboard.alerts.test_demo_alert import _measured, demo_run_context
from tests.dashboard.alerts.test_end_to_end import free_port

HOOK_SECRET = "notice-secret-0123456789"


def demo_slowdown(channels=()) -> tuple[AlertEvent, float]:
    """The demo's first hour: the LPU measured for real at normal speed and in its 3×
    episode, recorded one run a minute (40 normal, then slowed), the demo rule evaluated
    after each run as the evaluator does every minute, until it fires. Returns the event
    and the measured ratio of the slowed runs' median TTFT to the normal runs'."""
    with start_in_process() as sim:
        load_demo("local", sim.base_url.removesuffix("/v1"))
        # The demo probe's own prompt (standard-1k: its prefill is a quarter of the TTFT).
        workload = Workload.objects.get(slug=DEMO_WORKLOAD)
        normal = _measured(sim.base_url, "sim-fast", 5, workload)
        slowed = _measured(sim.base_url, "sim-fast@episode_first=0", 5, workload)
    assert all(r.status == "ok" for r in normal + slowed)
    rule = AlertRule.objects.get(name=DEMO_RULE)
    rule.channels.set(channels)
    ctx = demo_run_context(rule)
    start = timezone.now() - timedelta(hours=2)
    for minute in range(60):
        result = (normal if minute < 40 else slowed)[minute % 5]
        fields = {**recorder.run_fields(result, ctx), "timeline": None}
        fields["started_at"] = start + timedelta(minutes=minute, seconds=5)
        ProbeRun.objects.create(**fields)
        evaluator.evaluate_rule(rule, start + timedelta(minutes=minute, seconds=30))
        event = AlertEvent.objects.filter(rule=rule, state=AlertEvent.FIRING).first()
        if event:
            break
    assert event is not None, "the demo rule never fired on a 3× slowdown"
    # It fired early in the episode (the CUSUM's third or fourth slow run) …
    assert 42 <= minute <= 44, minute
    ratio = sorted(r.ttft_ms for r in slowed)[2] / sorted(r.ttft_ms for r in normal)[2]
    return event, ratio


@pytest.fixture
def smtp(settings):
    """A real SMTP server on 127.0.0.1 (aiosmtpd), and the mail settings pointing at it."""
    messages = []

    class Mailbox:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd)
            messages.append(message_from_bytes(envelope.content, policy=policy.default))
            return "250 OK"

    logging.getLogger("mail.log").setLevel(logging.WARNING)
    controller = Controller(Mailbox(), hostname="127.0.0.1", port=free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS = False
    yield messages
    controller.stop()


def _verified(request) -> dict:
    timestamp = request["headers"][TIMESTAMP_HEADER]
    assert request["headers"][SIGNATURE_HEADER] == signature(
        HOOK_SECRET, timestamp, request["body"]
    )
    return json.loads(request["body"])


@pytest.mark.django_db
def test_a_3x_slowdown_reads_x3_in_the_webhook_the_mail_the_page_and_the_list(
    client, receiver, smtp
):
    hook = Channel.objects.create(
        name="Hook", kind="webhook", config={"url": receiver.url, "secret": HOOK_SECRET}
    )
    mail = Channel.objects.create(name="Mail", kind="email", config={"to": ["oncall@x.test"]})
    event, measured = demo_slowdown([hook, mail])
    assert 2.7 < measured < 3.3  # the simulator's episode, as measured

    for note in Notification.objects.filter(event=event):
        assert deliver_notification.apply(args=[note.pk]).get() == "sent"

    body = _verified(receiver.requests[0])
    jsonschema.validate(body, json_schema())
    [alert] = body["alerts"]
    # The notice states the slowdown itself: ×3 within 10 % of what was measured.
    assert alert["change"]["ratio"] == pytest.approx(measured, rel=0.10)
    assert alert["change"]["ratio"] == pytest.approx(3, rel=0.10)
    assert alert["current"]["value"] > alert["limit"] > alert["baseline"]["value"]
    assert alert["since"] < alert["fired_at"]  # from the first slow run, before it fired
    assert alert["chart_url"].endswith(f"/alerts/{event.pk}/#alert-chart")
    change = f"×{alert['change']['ratio']:.2f} the baseline"
    assert change in alert["summary"]
    assert f"×{alert['change']['ratio']:.2f}" in body["subject"]

    [email] = smtp
    assert " ".join(str(email["Subject"]).split()) == body["subject"]
    text = email.get_content()
    assert f"Change: {alert['change']['pct']:+.0f} % ({change})" in text
    assert alert["chart_url"] in text

    page = client.get(f"/alerts/{event.pk}/").content.decode()
    facts = page[page.index('id="alert-summary"') : page.index("</dl>")]
    assert change in facts and alert["summary"] in page
    listing = client.get("/alerts/").content.decode()
    firing = listing[listing.index('id="active-alerts"') : listing.index('id="alert-rules"')]
    assert change in firing and f'href="/alerts/{event.pk}/#alert-chart"' in firing
    endpoint_page = client.get(f"/endpoints/{event.endpoint_id}/").content.decode()
    assert change in endpoint_page


@pytest.mark.django_db
def test_grouped_resolved_and_test_notices_are_instances_of_the_one_schema(runs, make_rule, now):
    from tests.dashboard.alerts.conftest import make_endpoint

    second = make_endpoint(runs.endpoint.canonical_model, "Fastcloud", "llama-3.1-8b")
    for endpoint in (runs.endpoint, second):
        runs.add(20, minutes_ago=120, endpoint=endpoint, ttft_ms=200.0)
        runs.add(6, minutes_ago=5, endpoint=endpoint, ttft_ms=600.0)
    evaluator.evaluate_rule(make_rule(test="mann_whitney"), now)
    events = list(AlertEvent.objects.order_by("pk"))
    schema = json_schema()

    grouped = notice_message(events, "firing").payload
    jsonschema.validate(grouped, schema)
    assert grouped["group"] == {"provider": "Fastcloud", "count": 2}
    assert [a["change"]["ratio"] for a in grouped["alerts"]] == [3.0, 3.0]

    runs.add(6, minutes_ago=-35, ttft_ms=200.0)
    evaluator.evaluate_all(now + timedelta(minutes=40))
    resolved = notice_message([AlertEvent.objects.get(pk=events[0].pk)], "resolved").payload
    jsonschema.validate(resolved, schema)
    [alert] = resolved["alerts"]
    assert (alert["current"]["value"], alert["fired_value"]) == (200.0, 600.0)
    assert "back to 200 ms" in alert["summary"] and "×3.00" in alert["summary"]

    test_notice = Channel(name="Hook", kind="webhook").test_message().payload
    jsonschema.validate(test_notice, schema)
    assert (test_notice["state"], test_notice["alerts"]) == ("test", [])


@pytest.mark.django_db
def test_the_openapi_document_serves_the_notice_schema(client):
    spec = client.get("/api/v1/openapi.json").json()
    hook = spec["webhooks"]["alertNotice"]["post"]["requestBody"]["content"]["application/json"]
    assert hook["schema"] == {"$ref": "#/components/schemas/Notice"}
    notice = spec["components"]["schemas"]["Notice"]
    assert notice["properties"]["version"] == {"const": 1}
    alert = spec["components"]["schemas"]["NoticeAlert"]
    for fact in ("metric", "baseline", "current", "change", "since", "chart_url"):
        assert fact in alert["required"]
    jsonschema.Draft202012Validator.check_schema(json_schema())


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 390])
def test_the_alert_page_and_list_state_the_slowdown_in_a_browser(live_server, width):
    event, _ = demo_slowdown()
    with chromium_page(width) as page:
        page.goto(f"{live_server.url}/alerts/")
        change = page.locator(f'tr[data-event="{event.pk}"] .alert-change')
        listed = change.inner_text()
        assert change.is_visible()
        page.locator(f'tr[data-event="{event.pk}"] a[href$="#alert-chart"]').click()
        page.locator("#alert-chart .main-svg").first.wait_for()
        drawn = page.evaluate("document.getElementById('alert-chart').data[0].y.length")
        shown = page.locator("#alert-change").inner_text()
        summary_visible = page.locator("#alert-summary").is_visible()
        fits = page.evaluate("document.querySelector('#alert-facts').scrollWidth <= innerWidth")
    ratio = float(re.search(r"×(\d+\.\d+) the baseline", shown).group(1))
    assert listed == shown and ratio == pytest.approx(3, rel=0.10)
    # The chart draws every stored run that counts for TTFT up to the alert: a run
    # measured while the machine was too busy for our client is stored client-bound and
    # left out (on a loaded CI machine one of the five replayed normal runs was).
    counted = ProbeRun.objects.filter(
        endpoint=event.endpoint, status="ok", client_bound=False
    ).count()
    assert summary_visible and fits and drawn == counted >= 20
