"""JSON bombs in the answers we parse beside a run (issue 33 item 4): a tokenize answer,
a Prometheus power answer and an Add-an-endpoint side answer of ~4 MB holding a million
empty arrays or objects (some 100 MB as Python objects) are refused before they are
built. A real loopback server answers; tracemalloc measures what the read held."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator

import pytest

from probes.engine import tokens
from probes.onboarding import connection_check
from tests.door_listener import CountingListener
from tests.test_door_out import _power_prometheus, _tokenizer

N = 1_300_000  # "[]," is 3 bytes: 3.9 MB, under the tokenize and power byte caps (4 MiB)
N_SIDE = 600_000  # 1.8 MB, under the side requests' cap (2 MiB)


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    tokens.encoding()  # loaded once per process (the telemetry window loads it), not measured
    server = CountingListener()
    yield server
    server.stop()


def _peak(call: Callable[[], object]) -> tuple[object, int]:
    tracemalloc.start()
    try:
        out = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return out, peak


def _side(url: str) -> str:
    return str(connection_check._bounded_json("GET", url + "/v1/models", {}))


BOMBS = {
    "tokenize": (_tokenizer, b'{"tokens": [' + b"[]," * N + b"[]]}", "more than"),
    "power": (
        _power_prometheus,
        b'{"data": {"result": [' + b"{}," * N + b"{}]}}",
        "expected format",
    ),
    "side-request": (_side, b'{"data": [' + b"{}," * N_SIDE + b"{}]}", "None"),
}


@pytest.mark.parametrize("kind", BOMBS)
def test_a_json_bomb_is_refused_before_it_is_built(kind, listener):
    read, body, said = BOMBS[kind]
    listener.body = body

    out, peak = _peak(lambda: read(listener.url))

    assert listener.connections >= 1
    assert said in out, out
    # The body itself (read, then joined: twice 4 MB) and the client; the bomb is 40-140 MB.
    assert peak < 24 << 20, f"{kind} held {peak >> 20} MiB"
