"""Our verdict's vocabulary (probes/engine/reasons.py) and the recorder's scrub
(probes/engine/sanitize.scrub): plain Python, no server needed."""

from __future__ import annotations

import pytest

from probes.engine import STATUSES, reasons, sanitize


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
    pattern = sanitize.secret_pattern([key, other, ""])
    value = {key: {"n": [f"Bearer {key}", {other: 1}]}, "finish_reason": key, "n": 3}

    clean = sanitize.scrub(value, pattern)

    assert clean == {
        "[redacted]": {"n": ["Bearer [redacted]", {"[redacted]": 1}]},
        "finish_reason": "[redacted]",
        "n": 3,
    }
    assert sanitize.scrub(value, None) is value  # no secret known: nothing to do
