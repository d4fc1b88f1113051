"""Responses bounded in count, not just bytes: each count limit of ``Limits`` ends the
run as a protocol_error that names it, and the stored timeline stays small whatever the
stream's length (issue 16, item 1). Against the raw-socket server of hostile.py.
"""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Iterator

import orjson
import pytest

from probes.engine import Limits, ProbeRequest, bounded, measure_sync, tokens
from probes.engine.metrics import compact_timeline
from probes.engine.sse import SSEParser

from . import hostile

LIMITS = Limits(connect_s=2, first_token_s=2, stall_s=2, total_s=5)


@pytest.fixture(scope="module")
def server() -> Iterator[hostile.HostileServer]:
    tokens.encoding()
    s = hostile.HostileServer()
    yield s
    s.stop()


def _chunk(delta: dict) -> bytes:
    return b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": delta}]}) + b"\n\n"


def _measure(server: hostile.HostileServer, body: bytes, **limits: int):
    server.reset()
    server.on_post = hostile.answer(hostile.sse_response(body + b"data: [DONE]\n\n"))
    req = ProbeRequest(
        api="openai-chat",
        base_url=server.base_url,
        model="m",
        warm=False,
        limits=Limits(**{**LIMITS.__dict__, **limits}),
    )
    return measure_sync(req)


def test_a_keep_alive_flood_ends_at_the_event_limit(server: hostile.HostileServer) -> None:
    body = _chunk({"content": "hi"}) + b":\n" * 50_000
    result = _measure(server, body, max_events=10_000)
    assert result.status == "protocol_error"
    assert "limit max_events" in result.error
    # Comments are counted, never kept on the timeline.
    assert result.timeline["ch"] == "a"


def test_empty_deltas_are_counted_not_kept(server: hostile.HostileServer) -> None:
    body = _chunk({"content": "hi"}) + _chunk({}) * 5000 + _chunk({"content": " there"})
    result = _measure(server, body)
    assert result.status == "ok"
    assert result.timeline["ch"] == "aa"
    assert result.stream["sse_events"] == 5003  # with [DONE]


def test_too_many_output_events_end_the_run(server: hostile.HostileServer) -> None:
    result = _measure(server, _chunk({"content": "x"}) * 3000, max_output_events=1000)
    assert result.status == "protocol_error"
    assert "limit max_output_events" in result.error
    assert len(result.timeline["ch"]) == 1000


def test_too_much_output_text_ends_the_run(server: hostile.HostileServer) -> None:
    result = _measure(server, _chunk({"content": "y" * 1000}) * 20, max_content_chars=5000)
    assert result.status == "protocol_error"
    assert "limit max_content_chars" in result.error


@pytest.mark.parametrize("index", [5, 10**9])
def test_too_many_tool_calls_end_the_run(server: hostile.HostileServer, index: int) -> None:
    call = {"tool_calls": [{"index": index, "function": {"name": "f", "arguments": "{}"}}]}
    result = _measure(server, _chunk(call), max_tool_calls=4)
    assert result.status == "protocol_error"
    assert "limit max_tool_calls" in result.error
    assert result.tool_calls is None or len(result.tool_calls) <= 4


def test_tool_call_fragments_within_the_limit_make_one_call(
    server: hostile.HostileServer,
) -> None:
    first = {"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": '{"a":'}}]}
    rest = {"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]}
    result = _measure(server, _chunk(first) + _chunk(rest) * 3, max_tool_calls=1)
    assert result.status == "ok"
    assert result.tool_calls == [{"name": "f", "arguments": '{"a": 1} 1} 1}'}]


def test_a_long_stream_is_stored_merged(server: hostile.HostileServer) -> None:
    result = _measure(server, _chunk({"content": "z"}) * 2500, stored_timeline_entries=1000)
    assert result.status == "ok"
    assert result.output_events == 2500  # metrics from every event
    tl = result.timeline
    assert tl["merged"] == 3 and len(tl["t_us"]) == len(tl["ch"]) == len(tl["tok"]) == 834
    assert sum(tl["tok"]) == 2500  # "z" is one token alone: nothing lost in merging


def test_compact_timeline_merges_neighbours() -> None:
    assert compact_timeline([1, 2, 3], "aar", [1, 1, 1], 3) == {
        "t_us": [1, 2, 3],
        "ch": "aar",
        "tok": [1, 1, 1],
    }
    assert compact_timeline([1, 2, 3, 4, 5], "rraat", [1, 2, 3, 4, 5], 2) == {
        "t_us": [3, 5],
        "ch": "at",
        "tok": [6, 9],
        "merged": 3,
    }


def _gzip_response(body: bytes) -> bytes:
    packed = gzip.compress(body, compresslevel=9)
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
        + f"content-length: {len(packed)}\r\nconnection: close\r\n\r\n".encode()
        + packed
    )


def _measured_with_peak(req: ProbeRequest):
    """The run, and the most memory the process held while it was measured."""
    tracemalloc.start()
    try:
        result = measure_sync(req)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def test_a_compressed_stream_is_read_and_its_bomb_inflated_only_to_the_byte_cap(
    server: hostile.HostileServer,
) -> None:
    server.reset()
    server.on_post = hostile.answer(_gzip_response(hostile.chat_stream("hello there")))
    req = ProbeRequest(api="openai-chat", base_url=server.base_url, model="m", warm=False)
    ok = measure_sync(req)
    assert ok.status == "ok" and ok.read_path == "aiter_raw"

    # A 64 MiB line inflating from ~65 KB: stopped at the byte and event caps, never
    # inflated whole.
    server.on_post = hostile.answer(_gzip_response(b"data: " + b"x" * (64 << 20)))
    bomb, peak = _measured_with_peak(req)
    assert bomb.status == "protocol_error"
    assert peak < 100 << 20, peak  # 64 MiB measured (141 MiB inflating each read whole)


def test_an_encoding_we_cannot_inflate_safely_is_a_protocol_error(
    server: hostile.HostileServer,
) -> None:
    server.reset()
    raw = hostile.sse_response(hostile.chat_stream(), headers=b"content-encoding: br\r\n")
    server.on_post = hostile.answer(raw)
    result = measure_sync(
        ProbeRequest(api="openai-chat", base_url=server.base_url, model="m", warm=False)
    )
    assert result.status == "protocol_error" and "content-encoding 'br'" in result.error


def _parser_reads(monkeypatch) -> list[int]:
    """The size of every chunk handed to the SSE parser (a spy on the real parser)."""
    sizes: list[int] = []
    real_feed = SSEParser.feed

    def feed(self, chunk: bytes, t_ns: int) -> None:
        sizes.append(len(chunk))
        real_feed(self, chunk, t_ns)

    monkeypatch.setattr(SSEParser, "feed", feed)
    return sizes


def test_a_compressed_flood_of_lines_is_inflated_a_step_at_a_time_within_the_line_budget(
    server: hostile.HostileServer, monkeypatch
) -> None:
    # 32 MiB of blank lines from ~32 KB of gzip: the line budget must stop it after a
    # few steps, not after the whole read was inflated and split (+310 MB, 4.1 s held).
    server.reset()
    server.on_post = hostile.answer(_gzip_response(b"\n" * (32 << 20)))
    sizes = _parser_reads(monkeypatch)
    req = ProbeRequest(
        api="openai-chat",
        base_url=server.base_url,
        model="m",
        warm=False,
        limits=Limits(**{**LIMITS.__dict__, "max_lines": 100_000}),
    )
    result, peak = _measured_with_peak(req)

    assert result.status == "protocol_error" and "max_lines" in result.error, result.error
    assert max(sizes) <= bounded.INFLATE_STEP, max(sizes)
    assert sum(sizes) <= 100_000 + bounded.INFLATE_STEP  # nothing inflated past the budget
    assert peak < 16 << 20, peak


def test_an_unterminated_line_is_kept_as_its_reads_and_joined_once() -> None:
    events: list[bytes] = []
    parser = SSEParser(lambda _type, data, _t: events.append(data))
    reads = [b"data: " + b"a" * 1000, *(b"b" * 65536 for _ in range(8))]
    for read in reads:
        parser.feed(read, 0)
    # Each read is held as it came, never appended to a growing copy of the line.
    assert len(parser._parts) == len(reads)
    assert all(held is read for held, read in zip(parser._parts, reads, strict=True))
    parser.feed(b"\n\n", 0)
    assert events == [b"a" * 1000 + b"b" * 8 * 65536] and parser._parts == []
