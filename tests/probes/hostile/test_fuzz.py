"""Fuzz the whole slot path with random hostile provider replies (hypothesis).

Each example is one raw HTTP response (status line, headers incl. Retry-After and
content-type, framing, an SSE body of random, half-valid and garbage events, usage
objects of random numbers and types, error bodies with control characters) served by a
real local server to ``runner.run_slot``: engine, caps, back-off and recording. Every
one must end as exactly one stored run with a known status, every field within its
column's limits, and a valid JSON view in the API.

INFERWATCH_FUZZ_EXAMPLES sets the number of examples (default 350: ~50 s on a busy
2-core VM).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import models
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from dashboard.web.api import run_as_dict
from probes.engine import STATUSES, sanitize
from probes.models import ProbeRun, Provider
from probes.slots import run as runner
from tests.probes.engine import hostile

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("INFERWATCH_FUZZ_EXAMPLES", "350"))

# -- what a hostile provider sends ------------------------------------------------------------

text = st.text(max_size=40)  # any code point but surrogates: NUL and controls included
big_ints = st.integers(-(2**70), 2**70)
numbers = st.one_of(
    st.integers(-5, 500),
    big_ints,
    st.sampled_from([2**40, -5, 2**31, 2**63, 2**64 - 1, 0]),
    st.floats(allow_nan=True, allow_infinity=True),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), numbers, text),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
usage_like = st.dictionaries(
    st.sampled_from(
        [
            "prompt_tokens",
            "completion_tokens",
            "total_tokens",
            "cost",
            "prompt_tokens_details",
            "completion_tokens_details",
            "prompt_cache_hit_tokens",
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "output_tokens_details",
            "queue_time",
            "completion_time",
            "time_to_first_token",
            "total_latency",
        ]
    ),
    st.one_of(numbers, json_values, st.fixed_dictionaries({"reasoning_tokens": numbers})),
    max_size=6,
)
finish_reasons = st.one_of(text, st.text(min_size=41, max_size=80), json_values)


def _openai_event(draw) -> object:
    # Mostly plausible events, so that half-valid streams get far enough to be recorded.
    kind = draw(st.sampled_from(["content"] * 6 + ["finish", "usage", "timing", "error", "any"]))
    if kind == "content":
        content = draw(st.one_of(st.text(min_size=1, max_size=12), text, json_values))
        return {"choices": [{"delta": {"content": content}}]}
    if kind == "finish":
        return {"choices": [{"delta": {}, "finish_reason": draw(finish_reasons)}]}
    if kind == "usage":
        return {"choices": [], "usage": draw(st.one_of(usage_like, json_values))}
    if kind == "timing":
        key = draw(st.sampled_from(["x_groq", "time_info", "timings", "perf_metrics"]))
        value = draw(st.one_of(usage_like, json_values))
        return {"choices": [], key: {"usage": value} if key == "x_groq" else value}
    if kind == "error":
        return {"error": draw(st.one_of(st.fixed_dictionaries({"message": text}), json_values))}
    return draw(json_values)


def _anthropic_event(draw) -> object:
    kind = draw(
        st.sampled_from(
            ["content_block_delta"] * 6 + ["message_start", "message_delta", "ping", "error", "any"]
        )
    )
    if kind == "message_start":
        return {"type": kind, "message": {"usage": draw(st.one_of(usage_like, json_values))}}
    if kind == "content_block_delta":
        dtype = draw(st.sampled_from(["text_delta", "thinking_delta", "input_json_delta"]))
        key = {"text_delta": "text", "thinking_delta": "thinking"}.get(dtype, "partial_json")
        value = draw(st.one_of(st.text(min_size=1, max_size=12), text, json_values))
        return {"type": kind, "delta": {"type": dtype, key: value}}
    if kind == "message_delta":
        return {
            "type": kind,
            "delta": draw(
                st.one_of(st.fixed_dictionaries({"stop_reason": finish_reasons}), json_values)
            ),
            "usage": draw(st.one_of(usage_like, json_values)),
        }
    if kind in ("ping", "error"):
        return {"type": kind, "error": draw(json_values)}
    return draw(json_values)


@st.composite
def sse_body(draw, api: str) -> bytes:
    event = _openai_event if api == "openai-chat" else _anthropic_event
    parts = []
    for _ in range(draw(st.integers(0, 8))):
        shape = draw(st.sampled_from(["json"] * 12 + ["garbage", "comment", "named", "crlf"]))
        if shape == "garbage":
            parts.append(b"data: " + draw(st.binary(max_size=40)) + b"\n\n")
        elif shape == "comment":
            parts.append(b": " + draw(text).encode("utf-8", "replace") + b"\n")
        else:
            # json.dumps: big integers, NaN and Infinity as a careless server writes them.
            data = json.dumps(event(draw)).encode()
            name = b"event: " + draw(st.sampled_from([b"x", b"message_delta", b"\x00"])) + b"\n"
            line = (name if shape == "named" else b"") + b"data: " + data
            parts.append(line + (b"\r\n\r\n" if shape == "crlf" else b"\n\n"))
    marker = b"data: [DONE]\n\n"
    if api == "anthropic-messages":
        marker = b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    ending = draw(st.sampled_from([marker] * 4 + [b"data: [DONE]\n\n", b"", b"data: {"]))
    return b"".join(parts) + ending


header_values = st.one_of(
    st.sampled_from(
        [
            "nan",
            "inf",
            "-inf",
            "-30",
            "0",
            "7",
            "1e308",
            "9" * 400,
            "1.5",
            "8m38.4s",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "Mon, 01 Jan 1990 00:00:00 GMT",
            "Mon, 99 Foo",
            "0001-01-01T00:00:00",
            "2999-01-01T00:00:00Z",
            "",
        ]
    ),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
)
content_types = st.sampled_from(
    ["text/event-stream", "text/event-stream; charset=utf-8", "application/json", "text/html",
     "text/plain", "", "application/json; charset=utf-8", "x/\x01"]
)  # fmt: skip


@dataclass
class Reply:
    api: str
    raw: bytes
    warmup_too: bool  # the warm-up GET gets the same reply


@st.composite
def replies(draw) -> Reply:
    api = draw(st.sampled_from(["openai-chat", "anthropic-messages"]))
    status = draw(st.sampled_from([200] * 5 + [400, 401, 404, 429, 429, 500, 503]))
    status = draw(st.one_of(st.just(status), st.just(status), st.integers(200, 599)))
    sse = 200 <= status < 300 and draw(st.sampled_from([True, True, True, False]))
    if sse:
        body = draw(sse_body(api))
    else:
        body = draw(
            st.one_of(
                st.builds(
                    lambda m, d: json.dumps({"error": {"message": m, "type": d}}).encode(),
                    text,
                    json_values,
                ),
                st.binary(max_size=200),
                st.builds(lambda t: f"<html><body>{t}</body></html>".encode(), text),
                st.just(b""),
            )
        )
    ctype = draw(st.one_of(st.just("text/event-stream"), content_types) if sse else content_types)
    headers = [f"content-type: {ctype}"]
    for name in draw(
        st.lists(
            st.sampled_from(["retry-after", "retry-after-ms", "x-ratelimit-reset-requests",
                             "x-ratelimit-limit-requests", "content-encoding"]),
            max_size=3,
        )
    ):  # fmt: skip
        value = (
            draw(header_values)
            if name != "content-encoding"
            else draw(st.sampled_from(["gzip", "br", "identity", "x"]))
        )
        headers.append(f"{name}: {value}")
    framing = draw(st.sampled_from(["close", "length", "chunked", "long_length"]))
    if framing == "length":
        headers.append(f"content-length: {len(body)}")
    elif framing == "long_length":
        headers.append(f"content-length: {len(body) + 10}")
    elif framing == "chunked":
        headers.append("transfer-encoding: chunked")
        cut = draw(st.integers(1, 50))
        pieces = [body[i : i + cut] for i in range(0, len(body), cut)]
        body = b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
    head = f"HTTP/1.1 {status} X\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"
    return Reply(api, head.encode("latin-1") + body, warmup_too=draw(st.booleans()))


# -- the limits every stored run keeps ---------------------------------------------------------


def assert_within_limits(run: ProbeRun) -> None:
    assert run.status in STATUSES
    for field in ProbeRun._meta.concrete_fields:
        value = getattr(run, field.attname)
        if value is None:
            continue
        where = f"{field.name}={value!r:.200}"
        if isinstance(field, models.FloatField):
            assert math.isfinite(value), where
        elif isinstance(field, models.PositiveSmallIntegerField):
            assert 0 <= value <= 32767, where
        elif isinstance(field, models.PositiveIntegerField):
            assert 0 <= value <= sanitize.MAX_COUNT, where
        elif isinstance(field, models.DecimalField):
            assert value.is_finite() and abs(value) < Decimal(10) ** (
                field.max_digits - field.decimal_places
            ), where
        elif isinstance(field, models.CharField | models.TextField):
            assert "\x00" not in value, where
            assert field.max_length is None or len(value) <= field.max_length, where
        elif isinstance(field, models.JSONField):
            assert "\\u0000" not in json.dumps(value, allow_nan=False), where
    assert len(run.error) <= sanitize.ERROR_MAX
    if run.retry_after_s is not None:
        assert 0 <= run.retry_after_s <= sanitize.MAX_RETRY_AFTER_S


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(reply=replies())
def test_any_reply_ends_as_exactly_one_stored_run_within_limits(probe, server, reply):
    provider: Provider = probe.endpoint.provider
    if provider.api_style != reply.api or provider.backoff_until is not None:
        provider.api_style, provider.backoff_until = reply.api, None
        Provider.objects.filter(pk=provider.pk).update(api_style=reply.api, backoff_until=None)
    server.on_post = hostile.answer(reply.raw)
    server.on_get = hostile.answer(reply.raw) if reply.warmup_too else hostile.small_json
    started = datetime.now(UTC)

    outcome = runner.run_slot(probe, None, "fuzz@host", "local")

    # One request, one result, one stored run (the slot's run group is new every time).
    assert len(outcome.results) == 1
    (run,) = ProbeRun.objects.filter(run_group=outcome.run_group).select_related(
        "endpoint__provider", "endpoint__canonical_model", "workload"
    )
    assert run.status == outcome.results[0].status
    event(f"status {run.status}")  # shown by --hypothesis-show-statistics
    assert_within_limits(run)
    json.dumps(run_as_dict(run), allow_nan=False)
    if run.status == "rate_limited":
        assert started + timedelta(seconds=1) <= provider.backoff_until
        assert provider.backoff_until <= started + timedelta(seconds=3700)
