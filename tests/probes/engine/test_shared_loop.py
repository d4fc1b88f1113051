"""One event loop per worker process (shared_loop.py) and one start at a time on it
(start_gate.py): real threads, real sockets to the simulator, no database."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from datetime import timedelta

import pytest

from probes.engine import (
    Limits,
    ProbeRequest,
    bounded,
    measure,
    measure_all,
    measure_sync,
    shared_loop,
    start_gate,
)
from probes.simulator import SimulatorProcess


@pytest.fixture
def loop_started():
    shared_loop.start()
    yield
    shared_loop.stop(grace_s=2)


def test_measurements_from_many_threads_stream_together_on_the_one_loop(
    sim_process: SimulatorProcess, loop_started
) -> None:
    threads_seen: set[str] = set()

    def one(i: int):
        async def traced():
            threads_seen.add(threading.current_thread().name)
            return await measure(
                ProbeRequest(
                    api="openai-chat",
                    base_url=sim_process.base_url,
                    model=f"sim@tps=50,ttft=300,seed={i}",
                    max_tokens=150,
                )
            )

        return bounded.run_sync(traced)

    one(99)  # the process's first stream pays its one-off costs (a full GC pass)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(16)))

    assert threads_seen == {"inferwatch-measure-loop"}
    assert {r.status for r in results} == {"ok"}
    # 16 streams of ~3.3 s each, started one after another: all streaming at once.
    last_start = max(r.started_at for r in results)
    first_end = min(r.started_at + timedelta(milliseconds=r.e2e_ms) for r in results)
    assert last_start < first_end


def test_an_error_comes_back_to_the_calling_thread_and_a_stopped_loop_says_so() -> None:
    shared_loop.start()

    async def broken():
        raise ValueError("from the loop")

    with pytest.raises(ValueError, match="from the loop"):
        shared_loop.run(broken)
    shared_loop.stop(grace_s=1)
    assert not shared_loop.running()
    with pytest.raises(shared_loop.LoopGone):
        shared_loop.run(broken)
    # Without the shared loop, the engine's sync calls run on a fresh loop as before.
    assert bounded.run_sync(lambda: asyncio.sleep(0, "fresh")) == "fresh"


def test_a_measurement_past_its_backstop_is_cancelled_and_frees_its_thread(loop_started) -> None:
    cancelled = threading.Event()

    async def stuck():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        shared_loop.run(stuck, timeout_s=0.2)
    assert cancelled.wait(2)


def test_streams_start_one_at_a_time_a_parallel_group_as_one() -> None:
    async def scenario() -> list[str]:
        order: list[str] = []
        first = await start_gate.take_turn(1)

        async def waiter(name: str, members: int) -> None:
            turn = await start_gate.take_turn(members)
            order.append(name)
            for _ in range(members):
                turn.sent()

        later = asyncio.create_task(waiter("later", 1))
        await asyncio.sleep(0.05)
        order.append("first sent")
        first.sent()
        await later
        group = await start_gate.take_turn(3)
        blocked = asyncio.create_task(waiter("after the group", 1))
        group.sent()
        group.sent()
        await asyncio.sleep(0.05)
        order.append("group's last sent")
        group.sent()
        await blocked
        return order

    assert asyncio.run(scenario()) == [
        "first sent",
        "later",
        "group's last sent",
        "after the group",
    ]


def test_a_stream_that_fails_before_sending_still_lets_the_next_start(
    sim_process: SimulatorProcess,
) -> None:
    dead = ProbeRequest(
        api="openai-chat", base_url="http://127.0.0.1:9/v1", model="x", limits=Limits(connect_s=1)
    )

    async def both():
        failed = await measure(dead)
        ok = await asyncio.wait_for(
            measure_all(
                [
                    ProbeRequest(
                        api="openai-chat",
                        base_url=sim_process.base_url,
                        model=f"sim@tps=500,seed={i}",
                        max_tokens=20,
                    )
                    for i in range(3)
                ]
            ),
            timeout=10,
        )
        return failed, ok

    failed, ok = asyncio.run(both())
    assert failed.status == "network_error"
    assert [r.status for r in ok] == ["ok"] * 3
    assert measure_sync(dead).status == "network_error"  # and on a fresh loop too


def test_a_groups_members_send_in_turn_once_all_are_ready() -> None:
    async def scenario() -> list[str]:
        order: list[str] = []
        turn = await start_gate.take_turn(3)
        members = [start_gate.Member(turn) for _ in range(3)]

        async def member(i: int, warm_up_s: float) -> None:
            await asyncio.sleep(warm_up_s)
            order.append(f"{i} ready")
            await members[i].go()
            order.append(f"{i} t0")
            await asyncio.sleep(0.01)  # sending
            order.append(f"{i} sent")
            members[i].sent()

        # Member 2 warms up last: nobody sends before it is ready; then one at a time.
        await asyncio.gather(member(0, 0), member(1, 0), member(2, 0.05))
        return order

    order = asyncio.run(scenario())
    assert order[:3] == ["0 ready", "1 ready", "2 ready"], order
    sends = order[3:]
    assert [event.split()[1] for event in sends] == ["t0", "sent"] * 3, order
    assert {event.split()[0] for event in sends[::2]} == {"0", "1", "2"}
    assert all(
        a.split()[0] == b.split()[0] for a, b in zip(sends[::2], sends[1::2], strict=True)
    ), order


def test_a_member_gone_before_its_t0_holds_no_one_up() -> None:
    async def scenario() -> bool:
        turn = await start_gate.take_turn(2)
        gone, left = start_gate.Member(turn), start_gate.Member(turn)
        gone.sent()  # its warm-up failed for good, say
        await asyncio.wait_for(left.go(), 1)
        left.sent()
        return True

    assert asyncio.run(scenario())


def test_each_member_of_a_wide_group_leaves_right_at_its_t0(
    sim_process: SimulatorProcess,
) -> None:
    """The simulator stamps each request's arrival with the kernel's clock (the same
    perf_counter as ours): 32 streams at 2,100 tok/s started as one group on one loop,
    each request reached the server within a few ms of its own t0 (let loose together,
    they left 15-25 ms after it, and that delay of ours counted as the provider's)."""
    reqs = [
        ProbeRequest(
            api="openai-chat",
            base_url=sim_process.base_url,
            model=f"sim-fast@tps=2100,ttft=20,tokens=400,seed={i}",
            max_tokens=400,
        )
        for i in range(32)
    ]
    results = asyncio.run(measure_all(reqs))
    late_ms = sorted((r.usage["x_simulator"]["t_request_ns"] - r.t0_ns) / 1e6 for r in results)
    assert all(r.status == "ok" for r in results)
    assert late_ms[len(late_ms) // 2] < 3, late_ms  # median: typically ~0.3 ms
