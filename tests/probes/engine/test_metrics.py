"""Metric definitions of the methodology (/methodology/), checked on hand-built timelines."""

from __future__ import annotations

import orjson
import pytest

from probes.engine import Prices, RunResult
from probes.engine.contract import PREFILL_MIN_TOKENS
from probes.engine.dialects import OpenAIChat
from probes.engine.metrics import fill_metrics, percentile
from probes.engine.tokens import SEGMENT_CHARS, count

MS = 1_000_000


def chunk(content: str | None = None, reasoning: str | None = None, **extra: object) -> bytes:
    delta = {}
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    return orjson.dumps({"choices": [{"index": 0, "delta": delta}], **extra})


def run(events: list[tuple[int, bytes]], prices: Prices | None = None) -> RunResult:
    rec = OpenAIChat()
    for t_ms, data in events:
        rec.on_event(None, data, t_ms * MS)
    result = RunResult()
    end = events[-1][0] * MS
    fill_metrics(result, rec, 0, end, streamed=True, prices=prices, include_text=True)
    return result


def test_batched_speed_subtracts_the_first_events_tokens_not_one() -> None:
    # 4 events of 4 one-token words, 10 ms apart: 12 tokens after the first event in 30 ms.
    words = " the of and to"
    result = run(
        [
            (100, chunk(words)),
            (110, chunk(words)),
            (120, chunk(words)),
            (130, chunk(words)),
            (131, b"[DONE]"),
        ]
    )
    assert result.output_tokens == 16 and result.token_source == "o200k"
    assert result.output_tps == pytest.approx(12 / 0.030)
    assert result.tokens_per_event == 4
    assert result.tpot_ms == pytest.approx(30 / 15)
    assert result.ttft_ms == 100 and result.e2e_ms == 131


def test_role_and_empty_chunks_do_not_start_the_clock() -> None:
    result = run(
        [
            (1, chunk("")),
            (2, chunk(None)),
            (50, chunk(" hi")),
            (60, chunk(" there")),
            (61, b"[DONE]"),
        ]
    )
    assert result.ttft_ms == 50 and result.output_events == 2
    assert result.ttfb_ms is None  # set by the client, not from events


def test_hidden_reasoning_is_excluded_from_speed_and_from_our_count() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 203,
        "completion_tokens_details": {"reasoning_tokens": 192},
    }
    events = [(1000 + 10 * i, chunk(" x")) for i in range(11)]
    events.append((1101, orjson.dumps({"choices": [], "usage": usage})))
    result = run(events)
    assert result.output_tokens == 203 and result.reasoning_tokens == 192
    assert result.output_tokens_o200k is None and result.output_tps_o200k is None
    assert result.output_tps == pytest.approx((11 - 1) / 0.100)


def test_cost_uses_cached_price_for_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "prompt_tokens_details": {"cached_tokens": 400},
    }
    result = run(
        [(10, chunk(" a")), (20, chunk(" b")), (21, orjson.dumps({"choices": [], "usage": usage}))],
        prices=Prices(input_per_m=2.0, cached_input_per_m=0.5, output_per_m=8.0),
    )
    assert result.cost_usd == pytest.approx((600 * 2.0 + 400 * 0.5 + 100 * 8.0) / 1e6)
    assert result.input_tokens == 1000 and result.cached_input_tokens == 400


def test_running_usage_totals_keep_the_last_value() -> None:
    result = run(
        [
            (10, chunk(" a", usage={"completion_tokens": 1})),
            (20, chunk(" b", usage={"completion_tokens": 2})),
            (30, chunk(" c", usage={"completion_tokens": 3})),
        ]
    )
    assert result.output_tokens == 3 and result.stream["usage_events"] == 3


def test_short_outputs_are_flagged_and_single_events_have_no_speed() -> None:
    result = run([(10, chunk(" a")), (11, b"[DONE]")])
    assert result.short_output is True
    assert result.output_tps is None and result.itl_ms_p50 is None and result.tpot_ms is None
    assert result.ttft_ms == 10


def test_percentiles_interpolate_linearly() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([5.0], 0.99) == 5.0
    assert percentile([0.0, 10.0], 0.95) == pytest.approx(9.5)


def test_long_texts_are_counted_in_segments_like_the_whole() -> None:
    text = " the of and" * (SEGMENT_CHARS // 5)
    assert count(text) == len(text.split())


def test_prefill_is_uncached_prompt_tokens_over_ttft_from_the_floor_up() -> None:
    def prefill(prompt: int, cached: int, ttft_ms: int, reasoning: int = 0) -> RunResult:
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": 3 + reasoning,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
        events = [(ttft_ms, chunk(" a")), (ttft_ms + 5, chunk(" b c"))]
        return run([*events, (ttft_ms + 6, orjson.dumps({"choices": [], "usage": usage}))])

    fresh = prefill(10_000, 0, 500)
    assert fresh.prefill_tps == pytest.approx(10_000 / 0.5)
    # Only what the cache did not serve was processed in that time.
    assert prefill(10_000, 4_000, 500).prefill_tps == pytest.approx(6_000 / 0.5)
    # Below the floor the round trip dominates: no figure, not a small one.
    floor = PREFILL_MIN_TOKENS
    assert prefill(floor, 0, 100).prefill_tps == pytest.approx(floor / 0.1)
    assert prefill(10_000, 10_000 - floor + 1, 100).prefill_tps is None
    # Hidden reasoning was generated inside TTFT: that TTFT is no prefill time.
    assert prefill(10_000, 0, 500, reasoning=200).prefill_tps is None
    # More cached than sent cannot be true.
    assert prefill(10_000, 12_000, 500).prefill_tps is None


def test_without_usage_our_count_of_a_fresh_prompt_stands_in() -> None:
    rec = OpenAIChat()
    rec.on_event(None, chunk(" hi"), 400 * MS)
    rec.on_event(None, chunk(" there"), 410 * MS)
    for prompt_tokens, expected in ((8_000, 8_000 / 0.4), (None, None)):
        result = RunResult()
        fill_metrics(
            result,
            rec,
            0,
            411 * MS,
            streamed=True,
            prices=None,
            include_text=False,
            prompt_tokens=prompt_tokens,
        )
        assert result.prefill_tps == (pytest.approx(expected) if expected else None)
