"""A slot that finds its cap full waits its turn (first come, first served) with a real
Redis, and past its lateness budget is skipped at once with a reason naming the cap; a
slot waiting when its worker stops is skipped, "stopped before it could start"
(probes/scheduling/waiting.py, probes/tasks.py)."""

from __future__ import annotations

import threading
import time

import pytest

from probes.models import DispatchedSlot, ProbeRun
from probes.scheduling import caps, heartbeat, waiting
from probes.tasks import run_probe
from tests.probes.conftest import current_slot, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def one_slot(make_probe, model: str = "sim-fast"):
    probe = make_probe(model)
    provider = probe.endpoint.provider
    provider.max_concurrency = 1
    provider.save()
    return probe, provider


def waiter(provider, label: str, until_s: float, order: list, hold_s: float = 0.05, **wait):
    def run():
        try:
            with caps.probe_slots(
                provider, "w1", wait=caps.Wait(time.time() + until_s, label, **wait)
            ):
                order.append(label)
                time.sleep(hold_s)
        except (caps.Busy, caps.Stopped) as exc:
            order.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_waiters_take_a_full_cap_in_the_order_they_came(make_probe):
    _, provider = one_slot(make_probe)
    order: list = []
    with caps.probe_slots(provider, "w1", wait=caps.Wait(time.time() + 1, "code-refactor")):
        threads = []
        for name in ["first", "second", "third"]:
            threads.append(waiter(provider, name, 10, order))
            time.sleep(0.15)  # each has taken its ticket before the next comes
        time.sleep(0.5)
        assert order == []  # all wait: nothing retried, nothing measured
    for thread in threads:
        thread.join(10)
    assert order == ["first", "second", "third"]


def test_past_its_budget_a_slot_gives_up_naming_the_cap_and_its_holder(make_probe):
    _, provider = one_slot(make_probe)
    with caps.probe_slots(provider, "w1", wait=caps.Wait(time.time() + 1, "code-refactor")):
        started = time.monotonic()
        late = caps.Wait(time.time() + 0.6, "chat")
        with pytest.raises(caps.Busy) as busy, caps.probe_slots(provider, "w1", wait=late):
            pass
        waited = time.monotonic() - started
    assert 0.4 <= waited <= 1.2
    assert busy.value.reason == f"provider {provider.slug} busy: 1 of 1 slots held by code-refactor"


def test_a_wide_group_is_not_overtaken_by_narrow_probes_that_came_later(make_probe):
    probe = make_probe()
    provider = probe.endpoint.provider
    provider.max_concurrency = 2
    provider.save()
    order: list = []

    def wide():
        wait = caps.Wait(time.time() + 10, "parallel-2")
        with caps.probe_slots(provider, "w1", width=2, wait=wait):
            order.append("wide")
            time.sleep(0.05)

    with caps.probe_slots(provider, "w1", wait=caps.Wait(time.time() + 1, "holder")):
        group = threading.Thread(target=wide)
        group.start()
        time.sleep(0.3)
        narrow = waiter(provider, "narrow", 10, order)  # one slot is free, but it is second
        time.sleep(0.5)
        assert order == []
    group.join(10)
    narrow.join(10)
    assert order == ["wide", "narrow"]


def test_a_slot_waiting_for_one_provider_does_not_hold_up_another_on_its_worker(make_probe):
    _, busy = one_slot(make_probe)
    _, free = one_slot(make_probe)
    order: list = []
    with caps.probe_slots(busy, "w1", wait=caps.Wait(time.time() + 1, "holder")):
        stuck = waiter(busy, "stuck", 3, order)
        time.sleep(0.3)
        started = time.monotonic()
        with caps.probe_slots(free, "w1", wait=caps.Wait(time.time() + 5, "other")):
            order.append("other")
        assert time.monotonic() - started < 0.5
    stuck.join(5)
    assert order == ["other", "stuck"]


def test_a_ticket_left_by_a_dead_waiter_does_not_block_the_queue(make_probe, clean_redis):
    _, provider = one_slot(make_probe)
    queue, seen = waiting._queues(caps.provider_semaphore(provider))
    clean_redis.zadd(queue, {"dead|x|1": 1.0})
    clean_redis.zadd(seen, {"dead|x|1": time.time() - waiting.STALE_S - 1})
    with caps.probe_slots(provider, "w1", wait=caps.Wait(time.time() + 1, "alive")):
        assert clean_redis.zcard(queue) == 0


def test_a_waiting_slot_gives_its_turn_up_when_its_worker_stops(make_probe):
    _, provider = one_slot(make_probe)
    order: list = []
    with caps.probe_slots(provider, "w1", wait=caps.Wait(time.time() + 1, "holder")):
        thread = waiter(
            provider, "waiting", 30, order, stopping=lambda: heartbeat.is_stopping("w1")
        )
        time.sleep(0.3)
        started = time.monotonic()
        heartbeat.record_mark("stopping", "w1")
        thread.join(5)
    assert time.monotonic() - started < 1.0
    assert len(order) == 1 and isinstance(order[0], caps.Stopped)


# -- through the task: skipped at once with the reason, never lost, no retry ---------------


@pytest.mark.worker
def test_a_slot_that_cannot_start_in_time_is_skipped_naming_the_cap(
    make_probe, processes, clean_redis
):
    # Dispatch ticks of 1 s: a 10 s interval may start at most 5 s late.
    slow, provider = one_slot(make_probe, "sim-fast@tps=8")  # 60 tokens: ~7.5 s
    other = make_probe("sim-fast", provider=provider, interval_s=10)
    worker = processes.worker("w1", concurrency=2, env={"DISPATCH_INTERVAL_S": "1"})
    slot = current_slot()
    for probe in (slow, other):
        DispatchedSlot.objects.create(
            probe=probe, slot_at=slot, region="local", queued_at=slot, deadline=slot,
            next_at=slot.replace(year=slot.year + 1),
        )  # fmt: skip
    run_probe.apply_async(args=[slow.pk, slot.isoformat()], queue="probes.local")
    assert wait_for(lambda: caps.provider_semaphore(provider).holders(clean_redis), 10)
    run_probe.apply_async(args=[other.pk, slot.isoformat()], queue="probes.local")

    skipped = wait_for(
        lambda: DispatchedSlot.objects.filter(probe=other, state="skipped").first(), 15
    )
    assert skipped, worker.output()
    assert skipped.reason.startswith(f"Skipped: provider {provider.slug} busy: 1 of 1 slots")
    assert "held by tiny" in skipped.reason
    assert not ProbeRun.objects.filter(probe=other).exists()
    assert wait_for(lambda: DispatchedSlot.objects.filter(probe=slow, state="done").exists(), 20)
    log = worker.output()
    assert "Traceback" not in log and "retry" not in log.lower(), log
    assert log.count(f"Probe {other.pk} slot") == 1, log


def _parked(provider) -> str:
    return waiting._queues(caps.provider_semaphore(provider))[0] + ":parked"


def test_a_ticket_waiting_for_its_own_worker_does_not_hold_back_other_workers(
    make_probe, settings, clean_redis
):
    # Issue 24, item 5: w1 is full, its ticket heads the provider's queue; w2's ticket,
    # behind it, takes one of the provider's free slots at once (5.6 s with 4 free, before).
    settings.WORKER_MAX_CONCURRENT_PROBES = 1
    probe = make_probe()
    provider = probe.endpoint.provider
    provider.max_concurrency = 5
    provider.save()
    order: list = []

    def on(worker: str, label: str, until_s: float) -> threading.Thread:
        def run():
            try:
                with caps.probe_slots(
                    provider, worker, wait=caps.Wait(time.time() + until_s, label)
                ):
                    order.append(label)
            except caps.Busy as exc:
                order.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    with caps.probe_slots(provider, "w1", wait=caps.Wait(time.time() + 1, "w1-busy")):
        stuck = on("w1", "w1-waiting", 20)  # heads the provider's queue, parked on w1
        assert wait_for(lambda: clean_redis.hlen(_parked(provider)) == 1, 10)
        started = time.monotonic()
        with caps.probe_slots(provider, "w2", wait=caps.Wait(time.time() + 5, "w2")):
            waited = time.monotonic() - started
        assert waited < 1.0, f"w2 waited {waited:.1f} s behind a ticket parked on w1"
        assert order == []  # w1's ticket still waits for its worker
    stuck.join(5)
    assert order == ["w1-waiting"]  # and takes its turn once w1 frees


def test_a_parked_ticket_keeps_its_claim_on_the_providers_room(make_probe, settings, clean_redis):
    settings.WORKER_MAX_CONCURRENT_PROBES = 1
    probe = make_probe()
    provider = probe.endpoint.provider
    provider.max_concurrency = 2
    provider.save()
    order: list = []

    def on(worker: str, label: str) -> threading.Thread:
        def run():
            with caps.probe_slots(provider, worker, wait=caps.Wait(time.time() + 20, label)):
                order.append(label)
                time.sleep(0.3)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    with caps.probe_slots(provider, "w1", wait=caps.Wait(time.time() + 1, "w1-busy")):
        parked = on("w1", "w1-parked")  # 1 of 2 provider slots free, kept for it
        assert wait_for(lambda: clean_redis.hlen(_parked(provider)) == 1, 10)
        behind = on("w2", "w2-behind")  # no room left once the parked claim counts
        queue = waiting._queues(caps.provider_semaphore(provider))[0]
        assert wait_for(lambda: clean_redis.zcard(queue) == 2, 10)
        time.sleep(0.6)
        assert order == []
    parked.join(5)
    behind.join(5)
    # Once w1 frees, both fit the provider's two slots and start together, in either order.
    assert sorted(order) == ["w1-parked", "w2-behind"]


def test_with_redis_away_past_its_budget_a_slot_gives_up_saying_so(make_probe):
    # Nothing is sent unchecked: a slot that cannot reach the caps waits for Redis as for a
    # full cap, and past its budget is skipped as Redis away (not lost, not a cap busy).
    from probes.platform.redis_client import redis_client
    from tests.probes.conftest import free_port

    _, provider = one_slot(make_probe)
    dead = redis_client(f"redis://127.0.0.1:{free_port()}/0")
    started = time.monotonic()
    wait = caps.Wait(time.time() + 2, "x")
    with (
        pytest.raises(caps.CapsAway, match="Redis, which keeps the caps, did not answer"),
        caps.probe_slots(provider, "w1", wait=wait, client=dead),
    ):
        pytest.fail("ran with no cap checked")
    assert 1.5 < time.monotonic() - started < 5
