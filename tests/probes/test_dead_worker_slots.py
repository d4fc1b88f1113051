"""A worker killed with SIGKILL never releases its request slots (its own cap's and the
provider's) nor its endpoint's turn: they are freed once it is known dead, not after their
lease (the provider's total timeout and a minute)."""

from __future__ import annotations

import os
import signal
import time

import pytest

from probes.scheduling import caps, heartbeat, ledger
from probes.tasks import run_probe, sweep_dispatched_slots
from tests.probes.conftest import current_slot, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def kill_mid_request(make_probe, processes, clean_redis):
    """A worker killed whole (main process and pool) while it holds both slots."""
    probe = make_probe("sim-fast@ttft=5000")  # the first token is 5 s away
    doomed = processes.worker("doomed", concurrency=1, own_session=True)
    per_provider = caps.provider_semaphore(probe.endpoint.provider)
    per_worker = caps.worker_semaphore(doomed.name, per_provider.lease_s)
    slot = current_slot()
    run_probe.apply_async(args=[probe.pk, slot.isoformat()], queue="probes.local")
    assert wait_for(lambda: per_provider.holders(clean_redis) == 1, 15), doomed.output()
    assert per_worker.holders(clean_redis) == 1
    os.killpg(doomed.proc.pid, signal.SIGKILL)
    doomed.proc.wait(timeout=10)
    return doomed, per_worker, per_provider


def test_the_sweeper_frees_the_slots_of_a_worker_whose_heartbeat_stopped(
    make_probe, processes, clean_redis
):
    doomed, per_worker, per_provider = kill_mid_request(make_probe, processes, clean_redis)

    # Its heartbeat is still fresh: it may be alive, so nothing is freed yet.
    sweep_dispatched_slots()
    assert (per_worker.holders(clean_redis), per_provider.holders(clean_redis)) == (1, 1)

    # Its last heartbeat ages past the silence limit (a minute), as it does when no
    # live worker refreshes it; the lease itself would still run for minutes.
    beat_key = f"{heartbeat.PREFIX}:worker:{doomed.name}"
    clean_redis.set(beat_key, f"{time.time() - ledger.WORKER_SILENT_AFTER_S - 1:.3f}")
    sweep_dispatched_slots()
    assert (per_worker.holders(clean_redis), per_provider.holders(clean_redis)) == (0, 0)


def test_the_sweeper_leaves_the_slots_of_a_live_worker_and_of_run_now(
    make_probe, processes, clean_redis
):
    probe = make_probe("sim-fast@ttft=5000")
    live = processes.worker("live", concurrency=1)
    per_provider = caps.provider_semaphore(probe.endpoint.provider)
    run_probe.apply_async(args=[probe.pk], queue="probes.local")
    assert wait_for(lambda: per_provider.holders(clean_redis) == 1, 15), live.output()
    # "Run now" in the admin holds a slot under a name that never sends heartbeats.
    admin = caps.worker_semaphore("admin@host", per_provider.lease_s)
    assert admin.acquire(clean_redis, "admin@host")

    sweep_dispatched_slots()

    assert per_provider.holders(clean_redis) == 1
    assert caps.worker_semaphore(live.name, 1).holders(clean_redis) == 1
    assert admin.holders(clean_redis) == 1


def test_a_worker_restarted_under_its_name_frees_what_its_dead_predecessor_held(
    make_probe, processes, clean_redis
):
    doomed, per_worker, per_provider = kill_mid_request(make_probe, processes, clean_redis)
    assert (per_worker.holders(clean_redis), per_provider.holders(clean_redis)) == (1, 1)
    turns = [clean_redis.zcard(k) for k in clean_redis.scan_iter(f"{caps.PREFIX}:endpoint:*")]
    assert turns == [1]  # its endpoint's turn, held too

    # As `make run`'s supervisor restarts it: same name, before it takes any task.
    again = processes.worker("doomed", concurrency=1)

    assert again.name == doomed.name
    assert (per_worker.holders(clean_redis), per_provider.holders(clean_redis)) == (0, 0)
    # Its worker slot, its provider slot and its endpoint's turn.
    assert f"Freed 3 slot(s) held by a previous {doomed.name} that died" in again.output()
