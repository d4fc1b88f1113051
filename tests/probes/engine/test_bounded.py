"""Every request we make to a provider ends: within a total deadline, within a byte limit.

Against a raw-socket server that stalls after its headers, trickles one byte at a time
or never ends its body (tests/probes/engine/hostile.py).
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator

import pytest

from probes.engine import Limits, ProbeRequest, RunResult, bounded, door, measure_sync, tokens

from . import hostile

MiB = 1024 * 1024


@pytest.fixture(scope="module")
def server() -> Iterator[hostile.HostileServer]:
    tokens.encoding()  # loaded once per process: not part of what the tests time
    s = hostile.HostileServer()
    yield s
    s.stop()


@pytest.fixture(autouse=True)
def fresh(server: hostile.HostileServer) -> None:
    server.reset()


def measure_within(server: hostile.HostileServer, limits: Limits, wait_s: float) -> RunResult:
    """measure_sync in a thread: a probe that hangs fails the test instead of hanging it."""
    box: dict[str, RunResult] = {}
    req = ProbeRequest(api="openai-chat", base_url=server.base_url, model="m", limits=limits)
    thread = threading.Thread(target=lambda: box.update(r=measure_sync(req)), daemon=True)
    thread.start()
    thread.join(wait_s)
    assert not thread.is_alive(), f"the probe was still running after {wait_s} s"
    return box["r"]


LIMITS = Limits(connect_s=2, first_token_s=3, stall_s=2, total_s=5, warmup_s=1.0)


@pytest.mark.parametrize(
    "warm_up", [hostile.headers_then_silence, hostile.trickle], ids=["silence", "trickle"]
)
def test_a_warm_up_that_stalls_or_trickles_is_given_up_at_its_deadline(server, warm_up):
    server.on_get = warm_up
    started = time.monotonic()

    result = measure_within(server, LIMITS, wait_s=10)

    # The warm-up was abandoned after ~1 s; the measured request still ran, cold.
    assert time.monotonic() - started < 5
    assert result.status == "ok", result.error
    assert "no complete response within 1 s" in result.stream["warmup_error"]
    assert result.cold_connection is True
    assert server.requests == ["GET", "POST"]


def test_an_endless_warm_up_body_stops_at_the_byte_limit(server):
    server.on_get = hostile.endless_body
    limits = Limits(connect_s=2, first_token_s=3, stall_s=2, total_s=5, warmup_max_bytes=MiB)

    result = measure_within(server, limits, wait_s=20)

    assert result.status == "ok", result.error
    assert f"larger than {MiB} bytes" in result.stream["warmup_error"]
    # What the server got rid of: the limit plus what the sockets' buffers hold, not GBs.
    assert server.sent_bytes < MiB + 16 * MiB


def test_a_measured_request_that_trickles_ends_at_its_total_limit(server):
    # Headers, then one byte every 0.1 s of an event stream that never completes.
    def trickle_events(conn: hostile.Conn) -> bool:
        conn.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        while conn.write(b":"):
            if conn.client_gone(0.1):
                break
        return False

    server.on_post = trickle_events
    limits = Limits(connect_s=1, first_token_s=1.5, stall_s=1, total_s=2)

    result = measure_within(server, limits, wait_s=8)

    assert result.status == "timeout_first_token"
    assert result.e2e_ms < 2500


def test_a_server_that_hangs_every_request_ends_with_a_clear_status(server):
    server.on_get = server.on_post = hostile.headers_then_silence
    limits = Limits(connect_s=1, first_token_s=1, stall_s=1, total_s=2, warmup_s=0.5)

    result = measure_within(server, limits, wait_s=8)

    assert result.status == "timeout_first_token"
    assert "warm-up GET given up: DeadlineExceeded: no complete response within 0.5 s" in (
        result.error
    )


# -- the helper itself ---------------------------------------------------------------------


def get(server: hostile.HostileServer, **kwargs) -> bounded.BoundedResponse:
    return door.request_sync("GET", server.base_url + "/models", **kwargs)


def test_bounded_request_reads_a_normal_answer(server):
    response = get(server, deadline_s=2, max_bytes=100)
    assert (response.status_code, response.json(), response.truncated) == (200, {}, False)


def test_bounded_request_has_a_total_deadline_not_only_a_read_timeout(server):
    server.on_get = hostile.trickle
    started = time.monotonic()
    with pytest.raises(bounded.DeadlineExceeded, match="within 0.5 s"):
        get(server, deadline_s=0.5, max_bytes=MiB)
    assert time.monotonic() - started < 2


def test_bounded_request_stops_an_endless_body(server):
    server.on_get = hostile.endless_body
    with pytest.raises(bounded.BodyTooLarge, match="larger than 100000 bytes"):
        get(server, deadline_s=10, max_bytes=100_000)
    truncated = get(server, deadline_s=10, max_bytes=100_000, truncate=True)
    assert truncated.truncated and truncated.body == b"x" * 100_000


def test_bounded_request_caps_what_a_compressed_body_inflates_to(server):
    bomb = gzip.compress(b"\0" * (64 * MiB))  # ~64 KB on the wire

    def respond(conn: hostile.Conn) -> bool:
        conn.write(
            b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\n"
            + f"content-length: {len(bomb)}\r\n\r\n".encode()
            + bomb
        )
        return False

    server.on_get = respond
    with pytest.raises(bounded.BodyTooLarge):
        get(server, deadline_s=10, max_bytes=MiB)
    small = gzip.compress(b'{"ok": true}')
    server.on_get = hostile.answer(
        b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\n"
        + f"content-length: {len(small)}\r\n\r\n".encode()
        + small
    )
    assert get(server, deadline_s=2, max_bytes=100).json() == {"ok": True}
