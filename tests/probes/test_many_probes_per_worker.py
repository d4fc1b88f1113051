"""Many probes per worker process: the threads pool measures every probe of a worker on
one event loop (probes/platform/worker_pool.py), a real worker against real Postgres, Redis and
the simulator over real sockets."""

from __future__ import annotations

import os
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from probes.models import DispatchedSlot, Probe, ProbeRun
from probes.scheduling import caps
from probes.tasks import dispatch_due_probes, sweep_dispatched_slots
from tests.probes.conftest import wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

# Slow enough that every stream is still open when the last one starts (streams start
# one at a time, ~0.1 s each on a busy 2-core VM): 2 s to the first token, then 60 tokens
# at 12 tok/s.
SLOW = "sim-fast@ttft=2000,tps=12"


def slow_probes(make_probe, n: int) -> list[Probe]:
    first = make_probe(SLOW)
    provider = first.endpoint.provider
    provider.max_concurrency = n
    provider.total_timeout_s = 20.0
    provider.save()
    return [first] + [make_probe(SLOW, provider=provider) for _ in range(n - 1)]


def make_due(probes: list[Probe]) -> None:
    Probe.objects.filter(pk__in=[p.pk for p in probes]).update(
        next_run_at=datetime.now(UTC) - timedelta(seconds=1)
    )


def most_at_once(runs) -> int:
    """The most runs whose measured spans (start to end of stream) overlapped."""
    edges = []
    for run in runs:
        edges.append((run.started_at, 1))
        edges.append((run.started_at + timedelta(milliseconds=run.e2e_ms), -1))
    open_now = peak = 0
    for _, step in sorted(edges, key=lambda edge: (edge[0], edge[1])):
        open_now += step
        peak = max(peak, open_now)
    return peak


def test_one_worker_process_carries_32_streams_at_once_each_slot_recorded_once(
    make_probe, processes
):
    probes = slow_probes(make_probe, 32)
    worker = processes.worker("many", concurrency=32)
    make_due(probes)

    assert dispatch_due_probes() == 32

    assert wait_for(lambda: ProbeRun.objects.count() >= 32, 60), worker.output()
    wait_for(lambda: ProbeRun.objects.count() > 32, 2)  # a duplicate would show by now
    runs = list(ProbeRun.objects.all())
    assert sorted(r.probe_id for r in runs) == sorted(p.pk for p in probes)  # one per slot
    assert {r.status for r in runs} == {"ok"}, [r.error for r in runs if r.status != "ok"]
    assert {r.worker for r in runs} == {worker.name}
    # One process for the task bodies, and beside it its measuring processes (one per
    # core): no pool process per probe.
    children = worker.children()
    assert 1 <= len(children) <= (os.cpu_count() or 1)
    for pid in children:
        assert b"probes.engine.measurer_child" in Path(f"/proc/{pid}/cmdline").read_bytes()
    assert most_at_once(runs) == 32
    assert wait_for(
        lambda: set(DispatchedSlot.objects.values_list("state", flat=True)) == {"done"}, 10
    )


def test_a_clean_stop_lets_the_probes_in_flight_finish_and_loses_no_slot(
    make_probe, processes, clean_redis
):
    probes = slow_probes(make_probe, 8)
    worker = processes.worker("stopping", concurrency=8)
    holders = caps.provider_semaphore(probes[0].endpoint.provider)
    make_due(probes)
    dispatch_due_probes()
    assert wait_for(lambda: holders.holders(clean_redis) == 8, 20), worker.output()

    worker.proc.send_signal(signal.SIGTERM)  # Ctrl-C's warm shutdown, mid-stream
    worker.proc.wait(timeout=30)

    runs = list(ProbeRun.objects.all())
    assert len(runs) == 8 and {r.status for r in runs} == {"ok"}, worker.output()
    assert sorted(r.probe_id for r in runs) == sorted(p.pk for p in probes)
    assert holders.holders(clean_redis) == 0
    assert sweep_dispatched_slots()["lost"] == 0
    assert set(DispatchedSlot.objects.values_list("state", flat=True)) == {"done"}
