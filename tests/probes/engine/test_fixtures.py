"""Every recorded transcript, replayed over real HTTP whole, byte by byte and at random
splits, must yield every value its expected.json lists."""

from __future__ import annotations

import json

import pytest

from probes.engine import ProbeRequest, RunResult, measure_sync

from .replay import FIXTURES, ReplayServer

SSE_FIXTURES = sorted(
    p.name[: -len(".expected.json")]
    for p in FIXTURES.glob("*.expected.json")
    if (FIXTURES / p.name.replace(".expected.json", ".sse")).exists()
)
MODES = ("whole", "bytes", "random-1", "random-2", "random-3")
API = {
    "openai-chat": "openai-chat",
    "anthropic-messages": "anthropic-messages",
    "openai-responses": "openai-responses",
}


def expected(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.expected.json").read_text())


def run(replay: ReplayServer, name: str, mode: str, api: str = "openai-chat") -> RunResult:
    return measure_sync(
        ProbeRequest(
            api=api, base_url=replay.base_url(name, mode), model="fixture", include_text=True
        )
    )


def test_all_fixtures_are_covered() -> None:
    assert len(SSE_FIXTURES) == 29
    assert (FIXTURES / "error-429-retry-after.http").exists()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", SSE_FIXTURES)
def test_fixture_yields_every_expected_value(replay: ReplayServer, name: str, mode: str) -> None:
    spec = expected(name)
    exp = spec["expect"]
    result = run(replay, name, mode, API[spec["api_shape"]])
    stream = result.stream
    assert stream is not None

    checks = {
        "sse_dispatched_events": stream["sse_events"],
        "sse_comment_lines": stream["comment_lines"],
        "incomplete_event_discarded_at_eof": stream["incomplete_event_discarded"],
        "event_types_seen": stream["event_types"],
        "done_sentinel_seen": stream["completion_marker_seen"],
        "message_stop_seen": stream["completion_marker_seen"],
        "json_data_events": stream["json_events"],
        "content_chunks": stream["content_chunks"],
        "reasoning_chunks": stream["reasoning_chunks"],
        "ping_events": stream["ping_events"],
        "first_output_event_index": stream["first_output_event_index"],
        "first_content_event_index": stream["first_answer_event_index"],
        "text": result.text,
        "reasoning_text": result.reasoning_text,
        "finish_reason": result.finish_reason,
        "usage_bearing_events": stream["usage_events"],
        "error_event_index": stream["error_event_index"],
        "server_timing": result.server_timing,
        "error": result.error_detail,
        "final_status": stream["final_status"],
        "usage_source": result.token_source if result.token_source == "usage" else None,
    }
    for key, value in exp.items():
        if key == "usage":
            norm = stream["usage_normalized"]
            if value is None:
                assert norm is None, key
            else:
                assert norm is not None
                for ukey, uvalue in value.items():
                    assert norm[ukey] == uvalue, f"usage.{ukey}"
        elif key == "stream_complete":
            if value:
                assert result.status == "ok", (result.status, result.error)
            else:
                assert result.status in ("truncated", "stream_error"), result.status
        else:
            assert key in checks, f"unhandled expectation {key}"
            assert checks[key] == value, key

    # The headline metrics follow from the same facts.
    assert result.http_status == 200
    if exp["first_output_event_index"] is None:
        assert result.ttft_ms is None
    else:
        assert result.ttft_ms is not None and result.ttft_ms > 0
    if exp["first_content_event_index"] is None:
        assert result.ttfat_ms is None
    if exp["usage"] and exp["usage"].get("completion_tokens") is not None:
        assert result.output_tokens == exp["usage"]["completion_tokens"]
        assert result.token_source == "usage"
    elif result.output_events is not None:
        assert result.token_source == "o200k"
    # No transcript has an event carrying answer and reasoning text at once.
    assert result.output_events == exp["content_chunks"] + exp.get("reasoning_chunks", 0)
    assert len(result.timeline["t_us"]) == len(result.timeline["ch"]) == len(result.timeline["tok"])


@pytest.mark.parametrize("mode", ("whole", "bytes"))
def test_429_fixture_yields_status_retry_after_and_rate_limits(
    replay: ReplayServer, mode: str
) -> None:
    exp = expected("error-429-retry-after")["expect"]
    raw = (FIXTURES / "error-429-retry-after.http").read_bytes()
    assert (b"\r\n" in raw.split(b"\r\n\r\n")[0]) == (exp["header_line_terminator"] == "CRLF")
    result = run(replay, "error-429-retry-after", mode)
    assert result.status == "rate_limited"
    assert result.http_status == exp["http_status"]
    assert result.retry_after_s == exp["retry_after_seconds"]
    assert result.rate_limit == exp["rate_limit"]
    assert (result.error_detail is not None) == exp["body_json_parses"]
    for key, value in exp["error"].items():
        assert result.error_detail[key] == value
    assert result.retryable == exp["retryable"]
    assert result.ttft_ms is None and result.output_tokens is None
    assert "Rate limit reached" in result.error
