"""Deliveries never stick, and every alert request is bounded from its first byte (issue 16,
items 6 and 7). Real local servers (raw sockets where HTTP has to be broken), locmem mail.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import tracemalloc
from collections.abc import Iterator

import pytest
from django.core import mail
from django.core.exceptions import ValidationError

from dashboard.alerts import evaluator
from dashboard.alerts.delivery import deliver_notification
from dashboard.alerts.models import Channel, Notification
from dashboard.alerts.transports import TransportError
from dashboard.alerts.transports.base import unexpected_failure
from dashboard.alerts.transports.http import bounded_post
from probes.onboarding import connection_check

pytestmark = pytest.mark.django_db


class RawServer:
    """Answers every connection with `respond(sock)`: HTTP as broken as a test needs."""

    def __init__(self, respond) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.respond = respond
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            self.respond(conn)
        except OSError:
            pass  # the client hung up, as it should
        finally:
            conn.close()


def drip_headers(conn: socket.socket) -> None:
    """One header byte every 0.5 s: per-read timeouts never fire, for 20 s and more."""
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100:
        conn.sendall(bytes([byte]))
        time.sleep(0.5)


# A gzip answer of ~100 KiB that inflates to 100 MiB.
BOMB = gzip.compress(b"\0" * (100 << 20), compresslevel=9)


def gzip_bomb(conn: socket.socket) -> None:
    conn.sendall(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
        + f"content-length: {len(BOMB)}\r\n\r\n".encode()
        + BOMB
    )


@pytest.fixture
def raw_server() -> Iterator:
    made: list[RawServer] = []

    def make(respond) -> RawServer:
        made.append(RawServer(respond))
        return made[-1]

    yield make
    for server in made:
        server.sock.close()


def test_a_receiver_dripping_its_headers_is_cut_off_at_the_deadline(raw_server):
    server = raw_server(drip_headers)
    started = time.monotonic()
    with pytest.raises(TransportError, match="timed out after 1.5 s"):
        bounded_post(server.url, b"{}", {}, total_s=1.5)
    assert time.monotonic() - started < 2.5


def test_a_side_request_dripping_its_headers_is_cut_off_at_the_deadline(raw_server, monkeypatch):
    monkeypatch.setattr(connection_check, "SIDE_REQUEST_S", 1.0)
    server = raw_server(drip_headers)
    started = time.monotonic()
    assert connection_check._bounded_json("GET", server.url + "/models", {}) is None
    assert time.monotonic() - started < 2.0


def test_a_compressed_answer_is_inflated_only_up_to_the_cap(raw_server):
    server = raw_server(gzip_bomb)
    tracemalloc.start()
    try:
        status, body = bounded_post(server.url, b"{}", {}, total_s=5.0, max_bytes=64 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert status == 200 and len(body) == 64 * 1024
    assert peak < 8 << 20  # not the 100 MiB the answer inflates to


@pytest.fixture
def fire(runs, make_rule, now):
    def fire_with(channel, **rule_fields) -> Notification:
        rule = make_rule(channels=[channel], **rule_fields)
        runs.add(20, minutes_ago=120, ttft_ms=200.0)
        runs.add(6, minutes_ago=5, ttft_ms=500.0)
        evaluator.evaluate_rule(rule, now)
        return Notification.objects.get()

    return fire_with


def test_a_notice_the_transport_cannot_encode_fails_shown_and_the_channel_stays_on(fire, receiver):
    # Stored before header values were checked on save: a non-ASCII value.
    hook = Channel.objects.create(
        name="Hook", kind="webhook", config={"url": receiver.url, "headers": {"X-Team": "équipe"}}
    )
    note = fire(hook)

    assert deliver_notification.apply(args=[note.pk]).get() == Notification.FAILED

    note.refresh_from_db()
    hook.refresh_from_db()
    assert note.status == Notification.FAILED and note.attempts == 1
    assert "could not be sent as it is (UnicodeEncodeError" in note.error
    assert note.attempt_log[-1]["ok"] is False
    assert hook.enabled and "UnicodeEncodeError" in hook.last_error  # shown, not switched off
    assert receiver.requests == []


def test_a_newline_in_a_subject_no_longer_stops_an_email(fire, mailbox_channel):
    note = fire(mailbox_channel, name="TTFT\nregression")

    deliver_notification.apply(args=[note.pk])

    [email] = mail.outbox
    assert "\n" not in email.subject and "TTFT regression" in email.subject
    note.refresh_from_db()
    assert note.status == Notification.SENT


def test_network_failures_retry_and_bad_data_fails_for_good():
    assert not unexpected_failure(ConnectionResetError("reset")).permanent
    bad = unexpected_failure(UnicodeEncodeError("ascii", "é", 0, 1, "no"))
    assert bad.permanent and not bad.channel_fault


def test_slack_text_is_escaped(fire, receiver):
    slack = Channel.objects.create(name="#oncall", kind="slack", config={"url": receiver.url})
    note = fire(slack, name="<!channel> & <https://evil.example|click>")

    deliver_notification.apply(args=[note.pk])

    text = receiver.requests[0]["json"]["text"]
    assert "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;" in text
    assert "<!channel>" not in text


@pytest.mark.parametrize(
    ("headers", "complaint"),
    [
        ({"X-Team": "équipe"}, "printable ASCII"),
        ({"X-Team": "a\r\nX-Injected: 1"}, "printable ASCII"),
        ({"Bad Name": "x"}, "not a valid header name"),
        ({"Content-Length": "1"}, "set by the HTTP client"),
    ],
)
def test_header_values_are_checked_when_the_channel_is_saved(headers, complaint):
    channel = Channel(name="Hook", kind="webhook", config={"url": "https://h.example/x"})
    channel.config["headers"] = headers
    with pytest.raises(ValidationError, match=complaint):
        channel.full_clean()


def test_an_opsgenie_key_that_cannot_be_a_header_is_refused_on_save():
    channel = Channel(name="Genie", kind="opsgenie", config={"api_key": "k" * 20 + "\nX: y"})
    with pytest.raises(ValidationError, match="api_key"):
        channel.full_clean()
