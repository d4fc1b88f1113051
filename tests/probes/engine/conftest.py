"""Engine tests: real HTTP on 127.0.0.1, no database."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from probes.simulator import (
    Profile,
    SimulatorHandle,
    SimulatorProcess,
    start_in_process,
    start_in_thread,
)

from .replay import FIXTURES, ReplayServer


@pytest.fixture(scope="session")
def replay() -> Iterator[ReplayServer]:
    if not FIXTURES.is_dir():
        pytest.fail(f"SSE fixtures not found at {FIXTURES} (they belong to the repository)")
    server = ReplayServer()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def sim() -> Iterator[SimulatorHandle]:
    """A simulator in a thread of the test process: fine for statuses, not for accuracy."""
    # The simulator thread must get the GIL back promptly to keep its schedule.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    with start_in_thread(Profile(tps=500, ttft_ms=50)) as handle:
        yield handle
    sys.setswitchinterval(interval)


@pytest.fixture(scope="session")
def sim_process() -> Iterator[SimulatorProcess]:
    """A simulator in its own process, so its schedule does not wait for our CPU."""
    with start_in_process() as handle:
        yield handle
