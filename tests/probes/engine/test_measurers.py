"""Measuring processes (measurers.py): real child processes, real sockets to the
simulator, no database."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import threading
import time

import pytest

from probes.engine import ProbeRequest, egress, measure_all_sync, measure_sync, measurers
from probes.simulator import SimulatorProcess


@pytest.fixture
def children():
    assert measurers.start(2) == 2
    yield
    measurers.stop(grace_s=5)


def _request(sim: SimulatorProcess, seed: int, tps: int = 2100, tokens: int = 300):
    return ProbeRequest(
        api="openai-chat",
        base_url=sim.base_url,
        model=f"sim@tps={tps},ttft=80,seed={seed}",
        max_tokens=tokens,
    )


def _measured_pids() -> set[int]:
    return {c.proc.pid for c in measurers._children if c.alive()}


def test_a_stream_is_measured_in_a_child_and_its_stamps_share_the_simulators_clock(
    sim_process: SimulatorProcess, children
) -> None:
    result = measure_sync(_request(sim_process, 1))

    assert result.status == "ok"
    assert result.output_tokens == 300
    assert result.loop_lag_first_ms is not None and result.loop_lag_max_ms is not None
    # t0 was stamped in the child: on the machine's one monotonic clock the simulator's
    # first send follows it by about the TTFT it measured (another clock would be off by
    # the processes' lifetimes, seconds at least).
    sim = (result.usage or {}).get("x_simulator")
    assert sim is not None
    assert abs((sim["t_first_ns"] - result.t0_ns) / 1e6 - result.ttft_ms) < 20


def test_measuring_happens_outside_the_calling_process(
    sim_process: SimulatorProcess, children
) -> None:
    # A child that is stopped (SIGSTOP) cannot answer: the call waits for it, proving the
    # stream is read there and not in this process.
    pids = _measured_pids()
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    done = threading.Event()
    box: list = []

    def call() -> None:
        box.append(measure_sync(_request(sim_process, 2, tokens=50)))
        done.set()

    threading.Thread(target=call, daemon=True).start()
    try:
        assert not done.wait(1.0)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
    assert done.wait(30.0)
    assert box[0].status == "ok"


def test_a_group_is_shared_among_children_and_answers_in_order(
    sim_process: SimulatorProcess, children
) -> None:
    reqs = [_request(sim_process, seed, tokens=200) for seed in range(7)]

    results = measure_all_sync(reqs)

    assert [r.model for r in results] == [r.model for r in reqs]
    assert {r.status for r in results} == {"ok"}


def test_many_threads_share_the_children(sim_process: SimulatorProcess, children) -> None:
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda s: measure_sync(_request(sim_process, s)), range(8)))

    assert {r.status for r in results} == {"ok"}
    assert len({r.model for r in results}) == 8


def test_a_child_that_dies_mid_run_costs_a_remeasure_not_the_slot(
    sim_process: SimulatorProcess, children
) -> None:
    box: list = []
    thread = threading.Thread(
        target=lambda: box.append(measure_sync(_request(sim_process, 3, tps=100, tokens=300)))
    )
    thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not any(c.streams for c in measurers._children):
        time.sleep(0.01)
    busy = [c for c in measurers._children if c.streams]
    assert busy, "the stream never reached a child"
    busy[0].proc.kill()
    thread.join(timeout=30)

    assert box and box[0].status == "ok"  # measured again in this process


def test_the_child_applies_the_callers_egress_policy(
    sim_process: SimulatorProcess, children
) -> None:
    before = egress.current()
    egress.configure(deny=["127.0.0.0/8"])
    try:
        result = measure_sync(_request(sim_process, 4, tokens=50))
    finally:
        egress.configure(tuple(map(str, before.deny)), tuple(map(str, before.allow)))

    assert result.status == "network_error"
    assert "EGRESS_DENY" in (result.error or "")


def test_without_children_the_caller_measures_itself(sim_process: SimulatorProcess) -> None:
    measurers.stop()
    assert not measurers.running()

    result = measure_sync(_request(sim_process, 5, tokens=50))

    assert result.status == "ok"


def test_stopped_children_exit_once_their_input_closes() -> None:
    assert measurers.start(1) == 1
    (child,) = measurers._children
    measurers.stop(grace_s=10)

    assert child.proc.poll() is not None
    assert not measurers.running()


def test_children_are_scheduling_groups_of_their_own_at_the_measuring_priority(children):
    """Where the kernel schedules by session (autogroup), a nice −10 child sharing the
    worker's session still waited for a core behind every other session of a busy
    machine (issue 34 item 3: its loop's holds were run-queue waits). A child is a
    session of its own, and that group gets the child's priority where allowed."""
    from pathlib import Path

    from probes.engine.measurer_child import NICE, RT_PRIORITY, RT_SOFT_S

    pids = _measured_pids()
    assert pids and all(os.getsid(pid) == pid != os.getsid(0) for pid in pids)
    if not Path("/proc/self/autogroup").exists() or os.geteuid() != 0:
        pytest.skip("no autogroup here, or not allowed to raise a group's priority")
    for pid in pids:
        deadline = time.monotonic() + 10
        while f"nice {NICE}" not in Path(f"/proc/{pid}/autogroup").read_text():
            assert time.monotonic() < deadline, Path(f"/proc/{pid}/autogroup").read_text()
            time.sleep(0.05)
        # The loop's thread (the child's main thread) is realtime, at the lowest priority,
        # under the watchdog; the pipe threads stay on the normal scheduler.
        while os.sched_getscheduler(pid) & ~os.SCHED_RESET_ON_FORK != os.SCHED_RR:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert os.sched_getparam(pid).sched_priority == RT_PRIORITY
        limits = Path(f"/proc/{pid}/limits").read_text()
        assert f"Max realtime timeout      {int(RT_SOFT_S * 1e6)}" in limits
        others = [int(t) for t in os.listdir(f"/proc/{pid}/task") if int(t) != pid]
        assert others and all(os.sched_getscheduler(t) == os.SCHED_OTHER for t in others)
