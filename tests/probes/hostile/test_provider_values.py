"""Provider-controlled values never make a run vanish: each slot ends as one stored run.

Implausible usage is dropped (our own count stands in), strings are cleaned and cut,
numbers are finite and in range; whatever the database still refuses is stored as a
protocol_error stand-in, and a poison row never blocks the Redis spool.
"""

from __future__ import annotations

import importlib
import json
import math
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from django.db import connection

from probes.engine import RunResult, sanitize
from probes.models import ProbeRun, Provider
from probes.recording import recorder
from probes.slots import run as runner
from tests.probes.engine import hostile

pytestmark = pytest.mark.django_db


def run_once(probe) -> ProbeRun:
    outcome = runner.run_slot(probe, None, "w1@host", probe.region)
    assert len(outcome.results) == 1
    (run,) = ProbeRun.objects.all()
    return run


def strict_json(text: str) -> object:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    ("usage", "culprit"),
    [
        ({"prompt_tokens": 5, "completion_tokens": 2**40}, "completion_tokens 1099511627776"),
        ({"prompt_tokens": -5, "completion_tokens": 3}, "prompt_tokens -5"),
        ({"prompt_tokens": 5, "completion_tokens": 3, "cost": 1e20}, "cost 1e+20"),
        ({"prompt_tokens": 5, "completion_tokens": 2**64 - 1}, "completion_tokens"),
    ],
)
def test_implausible_usage_is_dropped_with_a_note_and_our_count_kept(probe, server, usage, culprit):
    server.on_post = hostile.answer(hostile.sse_response(hostile.chat_stream("one two", **usage)))

    run = run_once(probe)

    assert run.status == "ok"
    assert run.token_source == "o200k" and run.output_tokens == run.output_tokens_o200k == 2
    assert run.input_tokens is None and run.provider_cost_usd is None and run.cost_usd is None
    assert culprit in run.usage["rejected"]
    assert run.usage["reported"]["prompt_tokens"] == usage["prompt_tokens"]


def test_a_long_finish_reason_and_control_characters_are_stored_clean(probe, server):
    body = b"".join(
        b"data: " + orjson.dumps(e) + b"\n\n"
        for e in [
            {"choices": [{"delta": {"content": "hi"}}]},
            {"choices": [{"delta": {}, "finish_reason": "\x00stop" + "x" * 50}]},
            {"choices": [], "usage": {"prompt_tokens": 3, "note\x00": "a\x00b" * 5000}},
        ]
    )
    server.on_post = hostile.answer(hostile.sse_response(body))  # no [DONE]: ends at close

    run = run_once(probe)

    assert run.status == "ok"
    assert run.finish_reason.startswith("stopxxx") and len(run.finish_reason) == 40
    assert run.usage["prompt_tokens"] == 3
    stored = json.dumps(run.usage)
    assert "\\u0000" not in stored and len(run.usage["note"]) <= sanitize.JSON_MAX_STRING


def test_an_error_body_with_nul_is_stored_without_it(probe, server):
    body = b'{"error": {"message": "bad\\u0000 thing\\u0007", "type": "x\\u0000y"}}'
    server.on_post = hostile.answer(
        b"HTTP/1.1 500 Oops\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )

    run = run_once(probe)

    assert (run.status, run.http_status) == ("server_error", 500)
    assert "bad thing" in run.error and "\x00" not in run.error and "\x07" not in run.error


RETRY_AFTERS = [
    "nan",
    "inf",
    "-inf",
    "-30",
    "1e308",
    "9" * 400,
    "Fri, 31 Dec 9999 23:59:59 GMT",
    "Mon, 01 Jan 1990 00:00:00 GMT",
    "Mon, 99 Foo 2024 99:99:99 GMT",
    "0001-01-01T00:00:00",
    "soon",
]


@pytest.mark.parametrize("value", RETRY_AFTERS)
@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
def test_any_retry_after_keeps_back_off_sane_and_the_api_valid_json(
    probe, server, client, header, value
):
    server.on_post = hostile.answer(
        b"HTTP/1.1 429 Too Many\r\ncontent-length: 0\r\n" + f"{header}: {value}\r\n\r\n".encode()
    )
    before = datetime.now(UTC)

    run = run_once(probe)

    assert run.status == "rate_limited"
    assert run.retry_after_s is None or 0 <= run.retry_after_s <= sanitize.MAX_RETRY_AFTER_S
    until = Provider.objects.get(pk=probe.endpoint.provider_id).backoff_until
    assert before + timedelta(seconds=1) <= until <= before + timedelta(seconds=3700)
    response = client.get("/api/v1/runs")
    assert response.status_code == 200
    (shown,) = strict_json(response.content.decode())["runs"]
    assert shown["retry_after_s"] is None or math.isfinite(shown["retry_after_s"])


def test_nan_from_the_providers_own_timing_never_reaches_storage(probe, server, client):
    events = [
        {"choices": [{"delta": {"content": "hi there"}}]},
        {
            "choices": [{"delta": {}, "finish_reason": "stop"}],
            "x_groq": {"usage": {"queue_time": "nan", "completion_time": "1e-320"}},
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
            "time_info": "not an object",
        },
    ]
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events)
    server.on_post = hostile.answer(hostile.sse_response(body + b"data: [DONE]\n\n"))

    run = run_once(probe)

    assert run.status == "ok"
    assert run.server_queue_ms is None and run.server_output_tps is None
    strict_json(client.get("/api/v1/runs").content.decode())


# -- what the database still refuses ---------------------------------------------------------


def poison_result(**bad) -> RunResult:
    result = RunResult(
        status="ok", api="openai-chat", model="m", started_at=datetime.now(UTC), ttft_ms=12.0
    )
    for name, value in bad.items():
        setattr(result, name, value)
    return result


def context(probe, index: int = 0) -> recorder.RunContext:
    return recorder.RunContext(
        endpoint_id=probe.endpoint_id,
        workload_id=probe.workload_id,
        region="local",
        worker="w1",
        probe_id=probe.pk,
        slot_at=datetime(2026, 6, 1, 12, tzinfo=UTC),
        request_index=index,
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"cost_usd": 1e20},
        {"finish_reason": "x" * 50},
        {"error": "bad\x00thing"},
        {"output_tokens": 2**40},
        {"input_tokens": -5},
        {"usage": {"k": "\x00"}},
        {"cost_usd": "1e20"},
        {"output_tps": "fast"},
    ],
    ids=[
        "cost",
        "finish_reason",
        "nul",
        "huge_int",
        "negative",
        "nul_in_json",
        "str",
        "not_a_float",
    ],
)
def test_a_row_the_database_refuses_is_stored_as_protocol_error(probe, bad):
    # Past the engine's edge (which cleans all of these): recording's own last line.
    assert recorder.record(poison_result(**bad), context(probe)) == "written"

    (run,) = ProbeRun.objects.all()
    assert run.status == "protocol_error"
    assert "could not be stored" in run.error and "(ok)" in run.error
    assert (run.probe_id, run.request_index, run.slot_at) == (
        probe.pk,
        0,
        datetime(2026, 6, 1, 12, tzinfo=UTC),
    )


def test_a_poison_row_does_not_block_the_spool(probe, clean_redis):
    poison = recorder.run_fields(poison_result(finish_reason="x" * 50), context(probe, 0))
    good = recorder.run_fields(poison_result(), context(probe, 1))
    recorder.spool(poison)
    clean_redis.rpush(recorder.SPOOL_KEY, "{not json")
    recorder.spool(good)

    assert recorder.drain_spool() == 2

    runs = {r.request_index: r for r in ProbeRun.objects.all()}
    assert (runs[0].status, runs[1].status) == ("protocol_error", "ok")
    assert clean_redis.llen(recorder.SPOOL_KEY) == 0
    (entry,) = clean_redis.lrange(recorder.SPOOL_REJECTED_KEY, 0, -1)
    assert json.loads(entry)["item"] == "{not json" and "not JSON" in json.loads(entry)["reason"]


def test_the_engines_limits_are_the_columns_limits():
    field = ProbeRun._meta.get_field
    assert field("finish_reason").max_length == sanitize.FINISH_REASON_MAX
    assert field("cost_usd").max_digits - field("cost_usd").decimal_places > math.log10(
        sanitize.MAX_COST_USD
    )


def test_non_finite_numbers_stored_before_the_fix_become_null(probe, client):
    migration = importlib.import_module("probes.migrations.0003_runs_without_non_finite_numbers")
    fields = recorder.run_fields(poison_result(), context(probe))
    ProbeRun.objects.bulk_create(
        [ProbeRun(**fields | {"retry_after_s": math.nan, "server_queue_ms": -math.inf})]
    )
    assert "NaN" in client.get("/api/v1/runs").content.decode()  # what an old row did

    with connection.cursor() as cursor:
        cursor.execute(migration.NULL_NON_FINITE)

    run = ProbeRun.objects.get()
    assert (run.retry_after_s, run.server_queue_ms, run.ttft_ms) == (None, None, 12.0)
    strict_json(client.get("/api/v1/runs").content.decode())
