"""A batched server's contention (Profile.contention): alone a stream runs at the
profile's speed; with others of the same profile in flight each runs slower, so the
parallel workload's slowdown shows on the demo (sim-gpu) as on a real GPU server."""

from __future__ import annotations

import asyncio

import pytest

from probes.engine import ProbeRequest, measure
from probes.simulator import BUILTIN, SimulatorProcess

TPS = 400  # tokens/s alone: 120 tokens take 0.3 s, long enough to measure, short to run
MODEL = f"sim-gpu@tps={TPS},ttft=10,contention=0.25,prefill=0"


async def speeds(sim: SimulatorProcess, model: str, at_once: int) -> list[float]:
    request = ProbeRequest(
        api="openai-chat",
        base_url=sim.base_url,
        model=model,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=120,
    )
    results = await asyncio.gather(*(measure(request) for _ in range(at_once)))
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    return [r.output_tps for r in results]


def test_streams_of_a_batched_profile_slow_each_other(sim_process) -> None:
    (alone,) = asyncio.run(speeds(sim_process, MODEL, 1))
    assert alone == pytest.approx(TPS, rel=0.15)
    together = asyncio.run(speeds(sim_process, MODEL, 4))
    # Four in flight: each at 1 / (1 + 3 × 0.25) = 0.57 of the speed alone, while all run.
    assert max(together) < 0.8 * alone
    assert min(together) > 0.4 * alone


def test_a_profile_without_contention_keeps_its_speed_under_load(sim_process) -> None:
    together = asyncio.run(speeds(sim_process, f"sim-fast@tps={TPS},ttft=10,prefill=0", 4))
    assert min(together) > 0.85 * TPS
    assert BUILTIN["sim-gpu"].contention > 0 and not BUILTIN["sim-fast"].contention
