"""One probe of an endpoint at a time (issue 34 item 5): two of our probes of one endpoint
at once load the same server, and each measures it slower than it is. The planner lays
them apart (tests/probes/test_planner.py); the endpoint's turn (probes/scheduling/caps.py)
holds where a slot runs longer than planned. Real Redis, real simulator, real slots."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest

from probes.models import Probe, ProbeRun, Workload
from probes.scheduling import caps
from probes.simulator import BUILTIN
from probes.slots.run import run_slot
from tests.probes.conftest import current_slot

pytestmark = pytest.mark.django_db(transaction=True)


def test_two_probes_of_one_endpoint_due_together_measure_it_one_after_the_other(
    make_probe, workload
):
    """The GPU profile slows each stream by a tenth per other one in flight: due in the
    same second, two probes of its endpoint ran at once and each read about 91 % of the
    speed it streams alone. Now the second waits for the first and both read ~100 %."""
    first = make_probe("sim-gpu")
    first.endpoint.provider.max_concurrency = 8  # the provider would take both at once
    first.endpoint.provider.save()
    other = Workload.objects.create(
        slug="tiny-2", name="Tiny 2", material="fixed", max_tokens=workload.max_tokens,
        messages=workload.messages,
    )  # fmt: skip
    second = Probe.objects.create(
        endpoint=first.endpoint, workload=other, region="local", interval_s=60, jitter_s=0
    )
    slot = current_slot()
    errors: list[BaseException] = []

    def run(probe: Probe) -> None:
        try:
            wait = caps.Wait(time.time() + 20, probe.workload.slug)
            run_slot(probe, slot, f"w-{probe.pk}", "local", wait=wait)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(p,)) for p in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []

    a, b = sorted(ProbeRun.objects.filter(endpoint=first.endpoint), key=lambda r: r.started_at)
    assert (a.status, b.status) == ("ok", "ok")
    assert a.started_at + timedelta(milliseconds=a.e2e_ms) <= b.started_at  # never at once
    alone = BUILTIN["sim-gpu"].tps
    assert a.output_tps > 0.97 * alone and b.output_tps > 0.97 * alone


def test_a_slot_that_cannot_have_its_endpoint_in_time_is_skipped_naming_the_holder(make_probe):
    probe = make_probe()
    provider, endpoint = probe.endpoint.provider, probe.endpoint_id
    provider.max_concurrency = 8
    provider.save()
    holding = caps.Wait(time.time() + 1, "code-refactor")
    with caps.probe_slots(provider, "w1", wait=holding, endpoint_id=endpoint):
        late = caps.Wait(time.time() + 0.5, "voice-turn")
        with (
            pytest.raises(caps.Busy) as busy,
            caps.probe_slots(provider, "w2", wait=late, endpoint_id=endpoint),
        ):
            pass  # pragma: no cover - never entered
        assert "endpoint busy: 1 of 1 turn held by code-refactor" in busy.value.reason
        # Run now (no wait) is refused at once rather than measuring beside it.
        with pytest.raises(caps.Busy), caps.probe_slots(provider, "admin", endpoint_id=endpoint):
            pass  # pragma: no cover - never entered
        # Another endpoint of the same provider is not held up.
        other = make_probe(provider=provider)
        with caps.probe_slots(provider, "w2", wait=late, endpoint_id=other.endpoint_id):
            pass
    with caps.probe_slots(provider, "w2", wait=caps.Wait(time.time() + 1), endpoint_id=endpoint):
        pass  # free again once the holder is done


def test_slots_waiting_for_their_endpoint_take_it_in_the_order_they_came(make_probe):
    """A stalled stream may hold an endpoint for half a minute: the slots behind it start
    first come, first served, not whichever polls first (a later one took the turn and the
    earliest was skipped, before)."""
    probe = make_probe()
    provider, endpoint = probe.endpoint.provider, probe.endpoint_id
    provider.max_concurrency = 8
    provider.save()
    order: list = []

    def waiter(label: str) -> threading.Thread:
        def run():
            wait = caps.Wait(time.time() + 10, label)
            with caps.probe_slots(provider, f"w-{label}", wait=wait, endpoint_id=endpoint):
                order.append(label)
                time.sleep(0.05)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    with caps.probe_slots(provider, "w0", wait=caps.Wait(time.time() + 1), endpoint_id=endpoint):
        threads = []
        for label in ["first", "second", "third"]:
            threads.append(waiter(label))
            time.sleep(0.15)  # each has its ticket before the next comes
        time.sleep(0.3)
        assert order == []
    for thread in threads:
        thread.join(10)
    assert order == ["first", "second", "third"]


def test_a_dead_worker_s_endpoint_turn_is_freed_with_its_other_slots(make_probe, clean_redis):
    probe = make_probe()
    turn = caps.endpoint_semaphore(probe.endpoint_id, 600)
    assert turn.acquire(clean_redis, f"dead{caps.HOLDER_SEP}code-refactor") is not None
    assert caps.release_worker_slots("dead", clean_redis) == 1
    assert turn.holders(clean_redis) == 0
