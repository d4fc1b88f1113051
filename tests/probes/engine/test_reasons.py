"""Our verdict's vocabulary (probes/engine/reasons.py) and the recorder's scrub
(probes/engine/scrub.py): plain Python, no server needed."""

from __future__ import annotations

import base64
from urllib.parse import quote

import pytest

from probes.engine import STATUSES, reasons, scrub


@pytest.mark.parametrize(
    ("status", "error", "reason"),
    [
        ("auth_error", "HTTP 403 Forbidden: db_password=x", "key_refused"),
        ("server_error", "HTTP 500: (limit max_lines)", "server_failed"),  # words ignored
        ("protocol_error", "more than 800000 SSE lines in one response (limit max_lines)",
         "over_limit:max_lines"),
        ("protocol_error", "response larger than 33554432 bytes", "over_limit:max_response_bytes"),
        ("protocol_error", "SSE event larger than 4194304 bytes", "over_limit:max_event_bytes"),
        ("protocol_error", "server answered with JSON, not an event stream",
         "not_an_event_stream"),
        ("protocol_error", "the run (ok) could not be stored, ...", "unstorable"),
        ("protocol_error", "malformed JSON in SSE event 3: unexpected char", "malformed_stream"),
        ("truncated", "stream ended inside an event", "ended_inside_event"),
        ("truncated", "RemoteProtocolError: peer closed", "no_completion_marker"),
        ("ok", None, ""),
    ],
)  # fmt: skip
def test_a_reason_is_always_one_of_ours(status, error, reason):
    assert reasons.classify(status, error) == reason
    assert reason == "" or reason in reasons.REASONS


def test_every_failed_status_has_a_reason_and_every_reason_a_label():
    for status in STATUSES:
        if status != "ok":
            assert reasons.classify(status, "whatever the provider said") in reasons.REASONS
    for reason in reasons.REASONS:
        assert reasons.label(reason), reason
        assert len(reason) <= 40  # ProbeRun.reason


def test_the_scrub_reads_keys_and_values_at_any_depth():
    key, other = "sk-live-abcdef123456", "tenant-token-99"
    scrubber = scrub.Scrubber([key, other, ""])
    value = {key: {"n": [f"Bearer {key}", {other: 1}]}, "finish_reason": key, "n": 3}

    clean = scrubber.value(value)

    assert clean == {
        "[redacted]": {"n": ["Bearer [redacted]", {"[redacted]": 1}]},
        "finish_reason": "[redacted]",
        "n": 3,
    }
    assert scrub.Scrubber([]).value(value) is value  # no secret known: nothing to do


def test_the_scrub_finds_a_key_in_any_form_and_any_12_character_piece():
    key = "sk-proj-" + "0123456789abcdefABCDEF" * 3  # 74 characters
    scrubber = scrub.Scrubber([key])

    for echoed in (
        key,
        key.upper(),
        key[:39] + "…",  # cut to a column first
        "…" + key[-20:],
        quote(f"a={key}/x", safe=""),
        base64.b64encode(f"user:{key}".encode()).decode(),
        base64.urlsafe_b64encode(f"ab{key}".encode()).decode(),
    ):
        clean = scrubber.text(f"before {echoed} after")
        assert "[redacted]" in clean, echoed
        folded = clean.lower()
        assert not any(key[i : i + 12].lower() in folded for i in range(len(key) - 11)), clean
    eleven = "11 characters of it: sk-proj-012"
    assert scrubber.text(eleven) == eleven
    with scrub.using(scrubber):
        assert scrub.cut("x" * 50 + key, 60) == "x" * 50 + "[redacted]"
