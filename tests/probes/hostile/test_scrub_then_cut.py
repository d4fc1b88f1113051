"""Scrub, then cut (issue 33 item 2): a key of 40 to 200 characters echoed by the provider
anywhere (finish_reason, a usage key, an error message, a check's detail), whole, cut to
a column's length, upper-cased, URL-encoded, in base64 or split over two fields, never
leaves a 12-character piece of itself in the stored row or on a public page.

A real loopback server plays the provider; the slot runs the whole path (engine, judge,
recorder, real Postgres and Redis) and the pages are read as an anonymous visitor.
"""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import quote

import orjson
import pytest

from probes.models import ProbeRun
from probes.slots import run as runner
from tests.probes.engine import hostile
from tests.probes.hostile.test_door_in import _public_pages, _stored_row

pytestmark = pytest.mark.django_db

LENGTHS = (40, 53, 120, 200)


def _key(length: int) -> str:
    digest = "".join(hashlib.sha256(f"{length}-{i}".encode()).hexdigest() for i in range(8))
    return ("sk-Live" + digest)[:length]


def _pieces(key: str) -> list[str]:
    """What must never be stored: any 12 characters of the key, in any case, and the
    base64 of a Basic header carrying it (its middle: no neighbour's bits)."""
    basic = base64.b64encode(f"user:{key}".encode()).decode()
    return [key[i : i + 12].lower() for i in range(len(key) - 11)] + [basic[8:20].lower()]


def _leaks(text: str, key: str) -> list[str]:
    folded = text.lower()
    return [piece for piece in _pieces(key) if piece in folded]


def _with_key(probe, key: str):
    provider = probe.endpoint.provider
    provider.requires_key = True
    provider.set_api_key(key)
    provider.save()
    probe.refresh_from_db()
    return probe


def _sse(*events: dict) -> bytes:
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)
    return hostile.sse_response(body + b"data: [DONE]\n\n")


def _assert_nowhere(run: ProbeRun, client, key: str) -> None:
    assert _leaks(_stored_row(run), key) == []
    for url, body in _public_pages(client, run).items():
        assert _leaks(body, key) == [], url


@pytest.mark.parametrize("length", LENGTHS)
def test_a_key_echoed_in_every_form_in_a_stream_is_stored_in_none(probe, server, client, length):
    key = _key(length)
    _with_key(probe, key)
    half = length // 2
    usage = {
        "prompt_tokens": 3,
        "completion_tokens": 2,
        f"echo-{key}": 1,  # an object key: cut to 200 characters
        "upper": f"Bearer {key.upper()}",
        "basic": base64.b64encode(f"user:{key}".encode()).decode(),
        "quoted": f"?key={quote(key, safe='')}",
        "split": [key[:half], key[half:]],
    }
    server.on_post = hostile.answer(
        _sse(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hello there"}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": key}]},  # cut to 40
            # A string cut to 2,000 characters part of the way into the key.
            {"choices": [], "usage": usage, "time_info": {"long": "x" * 1970 + key}},
        )
    )

    outcome = runner.run_slot(probe, None, "door@host", "local")

    run = ProbeRun.objects.get(run_group=outcome.run_group)
    assert run.status == "ok", run.error
    assert run.finish_reason == "[redacted]"
    assert run.usage["prompt_tokens"] == 3
    _assert_nowhere(run, client, key)


@pytest.mark.parametrize("length", LENGTHS)
def test_a_key_upper_cased_in_an_error_cut_at_300_is_stored_nowhere(probe, server, client, length):
    key = _key(length)
    _with_key(probe, key)
    message = "Incorrect API key provided: " + "x" * 200 + key.upper()
    body = orjson.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    head = "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\nconnection: close"
    length = f"\r\ncontent-length: {len(body)}\r\n\r\n"
    server.on_post = hostile.answer(head.encode() + length.encode() + body)

    outcome = runner.run_slot(probe, None, "door@host", "local")

    run = ProbeRun.objects.get(run_group=outcome.run_group)
    assert run.status == "auth_error"
    assert "Incorrect API key provided" in run.error
    _assert_nowhere(run, client, key)


@pytest.mark.parametrize("length", LENGTHS)
def test_a_key_in_a_checked_answer_is_scrubbed_before_the_detail_is_cut(
    probe, server, client, length
):
    key = _key(length)
    _with_key(probe, key)
    workload = probe.workload
    workload.answer_check = "json_schema"
    workload.params = {"schema": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    workload.save()
    answer = orjson.dumps({"n": "y" * 200 + key}).decode()
    server.on_post = hostile.answer(
        _sse(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": answer}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        )
    )

    outcome = runner.run_slot(probe, None, "door@host", "local")

    run = ProbeRun.objects.get(run_group=outcome.run_group)
    assert run.status == "ok", run.error
    assert run.output_valid is False and run.check_detail.startswith("schema: n: 'yyy")
    _assert_nowhere(run, client, key)
