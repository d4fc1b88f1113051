"""The SSE parser follows the WHATWG rules whatever the read boundaries are."""

from __future__ import annotations

import pytest

from probes.engine.fastread import BodyError, ChunkedDecoder
from probes.engine.sse import EventTooLarge, SSEParser


def parse(*chunks: bytes, max_event_bytes: int = 1 << 20) -> tuple[list, SSEParser]:
    events: list[tuple[bytes | None, bytes, int]] = []
    parser = SSEParser(
        lambda name, data, t: events.append((name, data, t)), max_event_bytes=max_event_bytes
    )
    for i, chunk in enumerate(chunks):
        parser.feed(chunk, i)
    parser.close()
    return events, parser


def test_it_splits_events_on_lf_crlf_and_cr_alike() -> None:
    for eol in (b"\n", b"\r\n", b"\r"):
        events, _ = parse(b"data: a" + eol + eol + b"data: b" + eol + eol)
        assert [e[1] for e in events] == [b"a", b"b"]


def test_a_crlf_split_across_two_reads_is_one_line_end() -> None:
    events, _ = parse(b"data: a\r", b"\n\r", b"\ndata: b\r\n\r\n")
    assert [e[1] for e in events] == [b"a", b"b"]


def test_it_strips_at_most_one_space_after_the_colon() -> None:
    events, _ = parse(b"data:x\n\ndata:  y\n\ndata\n\n")
    assert [e[1] for e in events] == [b"x", b" y", b""]


def test_multi_line_data_is_joined_with_newlines() -> None:
    events, _ = parse(b'data: {"a":\ndata: 1}\n\n')
    assert events[0][1] == b'{"a":\n1}'


def test_comments_are_counted_and_never_dispatched() -> None:
    events, parser = parse(b": keep-alive\n\n:\n\ndata: x\n\n")
    assert [e[1] for e in events] == [b"x"]
    assert parser.comments == 2


def test_event_names_apply_to_one_event_only() -> None:
    events, _ = parse(b"event: ping\ndata: 1\n\ndata: 2\n\nevent: lonely\n\ndata: 3\n\n")
    assert [(e[0], e[1]) for e in events] == [(b"ping", b"1"), (None, b"2"), (None, b"3")]


def test_an_event_split_inside_a_utf8_character_is_whole() -> None:
    body = 'data: {"t":"你好"}\n\n'.encode()
    cut = body.index("好".encode()) + 1
    events, _ = parse(body[:cut], body[cut:])
    assert events[0][1].decode() == '{"t":"你好"}'


def test_each_event_gets_the_timestamp_of_the_read_that_completed_it() -> None:
    events, _ = parse(b"data: a\n\ndata: b", b"\n\ndata: c\n\n")
    assert [(e[1], e[2]) for e in events] == [(b"a", 0), (b"b", 1), (b"c", 1)]


def test_an_unterminated_event_at_eof_is_discarded() -> None:
    events, parser = parse(b"data: a\n\ndata: b\n")
    assert [e[1] for e in events] == [b"a"]
    assert parser.incomplete_event_discarded is True


def test_a_leading_bom_is_ignored_and_retry_id_fields_dispatch_nothing() -> None:
    events, parser = parse(b"\xef\xbb\xbfretry: 3000\n\nid: 7\ndata: a\n\n")
    assert [e[1] for e in events] == [b"a"]
    assert parser.last_event_id == b"7"


def test_an_event_larger_than_the_limit_is_refused() -> None:
    with pytest.raises(EventTooLarge):
        parse(b"data: " + b"x" * 2000 + b"\n", max_event_bytes=1000)
    with pytest.raises(EventTooLarge):
        parse(b"data: " + b"x" * 600 + b"\ndata: " + b"x" * 600 + b"\n", max_event_bytes=1000)


def test_chunked_decoding_survives_any_split() -> None:
    body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n"
    for size in (1, 2, 3, 7, len(body)):
        decoder = ChunkedDecoder()
        out = b"".join(decoder.decode(body[i : i + size]) for i in range(0, len(body), size))
        assert out == b"hello, world" and decoder.done


def test_bad_chunk_framing_is_an_error() -> None:
    with pytest.raises(BodyError):
        ChunkedDecoder().decode(b"zz\r\nhello\r\n")
    with pytest.raises(BodyError):
        ChunkedDecoder().decode(b"2\r\nhelloXX")
