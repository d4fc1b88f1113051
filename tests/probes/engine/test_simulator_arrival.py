"""The simulator's receipt is when the request reached the machine, not when its loop got
to it (probes/simulator/arrival.py): a busy simulator must not shorten the truth the
client is held to."""

from __future__ import annotations

import json
import threading
import time
from time import perf_counter_ns

import httpx
import pytest

from probes.simulator import arrival, start_in_thread

pytestmark = pytest.mark.skipif(arrival.SO_TIMESTAMPNS is None, reason="no kernel stamps here")
HELD_S = 0.3


def x_simulator(body: str) -> dict:
    for line in body.splitlines():
        if line.startswith("data: {") and "x_simulator" in line:
            return json.loads(line.removeprefix("data: "))["usage"]["x_simulator"]
    raise AssertionError(f"no x_simulator in {body[:500]!r}")


def test_a_request_that_waits_for_a_busy_simulator_is_stamped_on_arrival():
    with start_in_thread() as sim, httpx.Client(timeout=10) as client:
        ready, held_until = threading.Event(), []

        def hold() -> None:  # the simulator's loop, busy elsewhere
            ready.set()
            time.sleep(HELD_S)
            held_until.append(perf_counter_ns())

        sim._loop.call_soon_threadsafe(hold)
        assert ready.wait(5)
        t_sent = perf_counter_ns()
        response = client.post(
            f"{sim.base_url}/chat/completions",
            json={
                "model": "sim-fast@tps=4000,ttft=10,tokens=5",
                "messages": [{"role": "user", "content": "Say hello."}],
                "stream": True,
                "stream_options": {"include_usage": True},
            },
        )
        t_done = perf_counter_ns()
    stamps = x_simulator(response.text)
    # The request was sent while the loop was held, with most of the hold still to come
    # (this thread may itself wait for a core before it sends), and answered after it.
    assert (held_until[0] - t_sent) / 1e9 >= HELD_S / 2
    assert t_done >= held_until[0]
    # Stamped where the bytes arrived (within a few ms of sending), not HELD_S later.
    late_ms = (stamps["t_request_ns"] - t_sent) / 1e6
    assert -1 < late_ms < 50, late_ms
