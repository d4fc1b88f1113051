"""Nothing lost, nothing doubled: real Celery workers against real Postgres and Redis.

Restart tests use a private redis-server and a TCP relay in front of Postgres, never the
machine's shared services.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime, timedelta

import pytest

from probes.models import Probe, ProbeRun
from probes.scheduling import caps
from probes.tasks import dispatch_due_probes, run_probe
from tests.probes.conftest import current_slot, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def make_due(*probes):
    Probe.objects.filter(pk__in=[p.pk for p in probes]).update(
        next_run_at=datetime.now(UTC) - timedelta(seconds=1)
    )


def runs_of(probe):
    return list(ProbeRun.objects.filter(probe=probe))


def test_a_worker_in_eu_west_consumes_only_its_regions_queue(make_probe, processes, clean_redis):
    local = make_probe(region="local")
    eu = make_probe(region="eu-west")
    worker = processes.worker("eu", queues="probes.eu-west", region="eu-west", concurrency=1)
    make_due(local, eu)

    assert dispatch_due_probes() == 2

    assert wait_for(lambda: runs_of(eu), 20), worker.output()
    (run,) = runs_of(eu)
    assert (run.region, run.worker, run.status) == ("eu-west", worker.name, "ok")
    assert runs_of(local) == []
    assert clean_redis.llen("probes.local") == 1  # waiting for a worker of its own region


def test_the_provider_cap_holds_across_two_workers(make_probe, processes):
    first = make_probe("sim-fast@ttft=700,tps=300")
    provider = first.endpoint.provider
    provider.max_concurrency = 1
    provider.save()
    probes = [first] + [make_probe("sim-fast@ttft=700,tps=300", provider=provider) for _ in "ab"]
    processes.worker("w1", concurrency=2)
    processes.worker("w2", concurrency=2)
    make_due(*probes)

    dispatch_due_probes()

    assert wait_for(lambda: ProbeRun.objects.count() == 3, 30)
    spans = sorted(
        (r.started_at, r.started_at + timedelta(milliseconds=r.e2e_ms))
        for r in ProbeRun.objects.all()
    )
    assert all(r.status == "ok" for r in ProbeRun.objects.all())
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert start >= end - timedelta(milliseconds=5), "two requests overlapped"


def test_a_worker_killed_mid_probe_leaves_no_half_row_and_the_slot_runs_once(
    make_probe, processes, clean_redis
):
    # A pool process killed alone is prefork's case (the threads pool dies whole, as in
    # test_dead_worker_slots.py); the prefork pool stays a choice (`--pool prefork`).
    probe = make_probe("sim-fast@ttft=2500")
    worker = processes.worker("w1", concurrency=1, pool="prefork")
    slot = current_slot()
    holders = caps.provider_semaphore(probe.endpoint.provider)

    run_probe.apply_async(args=[probe.pk, slot.isoformat()], queue="probes.local")
    assert wait_for(lambda: holders.holders(clean_redis) == 1, 15), worker.output()
    (child,) = worker.children()
    os.kill(child, signal.SIGKILL)  # mid-request: the first token is 2.5 s away

    assert wait_for(lambda: ProbeRun.objects.count() == 1, 25), worker.output()
    assert "WorkerLostError" in worker.output() or "SIGKILL" in worker.output()
    wait_for(lambda: ProbeRun.objects.count() > 1, 3)  # give a duplicate every chance
    (run,) = ProbeRun.objects.all()
    assert (run.slot_at, run.status) == (slot, "ok")


def test_a_run_finished_while_the_database_is_away_is_written_when_it_comes_back(
    make_probe, processes, clean_redis, db_proxy
):
    probe = make_probe("sim-fast@ttft=1500")
    worker = processes.worker("w1", concurrency=1, db_port=db_proxy.port)
    holders = caps.provider_semaphore(probe.endpoint.provider)

    run_probe.apply_async(args=[probe.pk, current_slot().isoformat()], queue="probes.local")
    assert wait_for(lambda: holders.holders(clean_redis) == 1, 15), worker.output()
    db_proxy.down()  # Postgres "restarts" while the probe is measuring
    assert wait_for(lambda: "Database unavailable" in worker.output(), 15), worker.output()
    db_proxy.up()

    assert wait_for(lambda: ProbeRun.objects.count() == 1, 20), worker.output()
    assert ProbeRun.objects.get().status == "ok"


def slots_while_the_database_is_away(worker, probes, clean_redis, db_proxy) -> datetime:
    """Send one slot of each probe with Postgres away, its message expiring soon after, as
    a slot's does at the next; wait until one run is measured and kept in the spool, then
    bring Postgres back and write the spool. The slot's time."""
    from probes.recording.recorder import drain_spool
    from probes.recording.run_spool import SPOOL_KEY

    db_proxy.down()
    slot = current_slot()
    expires = datetime.now(UTC) + timedelta(seconds=15)
    for probe in probes:
        run_probe.apply_async(
            args=[probe.pk, slot.isoformat()], queue="probes.local", expires=expires
        )
    assert wait_for(lambda: clean_redis.llen(SPOOL_KEY) == 1, 60), worker.output()
    db_proxy.up()
    drain_spool()
    return slot


def test_a_slot_that_starts_as_the_database_goes_away_is_measured_and_recorded(
    make_probe, processes, clean_redis, db_proxy
):
    # Issue 32 item 8: with Postgres away for 60 s, a slot taken 2 s before was lost: its
    # task could not read the probe, retried until its message expired at the next slot,
    # and Celery dropped it. The worker's last read of the probe stands in now.
    probe = make_probe("sim-fast")
    worker = processes.worker("w1", concurrency=2, db_port=db_proxy.port)
    # A second before the slot taken below, which current_slot() names to the second.
    earlier = current_slot() - timedelta(seconds=2)
    run_probe.apply_async(args=[probe.pk, earlier.isoformat()], queue="probes.local")
    assert wait_for(lambda: len(runs_of(probe)) == 1, 20), worker.output()
    # Made after the worker started, so not read by it as it started (standby.warm), nor
    # by a slot since: it waits for the database and is not measured.
    fresh = make_probe("sim-fast@ttft=20")

    slot = slots_while_the_database_is_away(worker, (probe, fresh), clean_redis, db_proxy)
    assert slot != earlier
    assert [(r.probe_id, r.status) for r in ProbeRun.objects.filter(slot_at=slot)] == [
        (probe.pk, "ok")
    ]


def test_a_worker_reads_its_regions_probes_as_it_starts(
    make_probe, processes, clean_redis, db_proxy
):
    # So a slot taken as the database goes away right after the worker (re)started is
    # measured too (the compose check restarts the worker just before Postgres goes away);
    # not a probe of another region.
    probe = make_probe("sim-fast")
    elsewhere = make_probe("sim-fast@ttft=20", region="eu-west")
    worker = processes.worker("w1", concurrency=2, db_port=db_proxy.port)

    slot = slots_while_the_database_is_away(worker, (probe, elsewhere), clean_redis, db_proxy)
    assert [r.probe_id for r in ProbeRun.objects.filter(slot_at=slot)] == [probe.pk]


def test_worker_and_beat_reconnect_after_redis_restarts(processes, private_redis, db):
    env = {"DISPATCH_INTERVAL_S": "1"}
    worker = processes.worker("w1", queues="celery", broker=private_redis.url, env=env)
    beat = processes.beat(private_redis.url, env=env)
    client = private_redis_client(private_redis.url)
    tick = "inferwatch:heartbeat:beat:dispatcher"
    assert wait_for(lambda: client.exists(tick), 45), beat.output() + worker.output()

    private_redis.stop()
    private_redis.start()  # empty: --save '' keeps nothing
    assert not client.exists(tick)

    assert wait_for(lambda: client.exists(tick), 45), beat.output() + worker.output()


def private_redis_client(url):
    from probes.platform.redis_client import redis_client

    return redis_client(url)


def test_a_hanging_flooding_or_garbage_provider_costs_one_slot_and_blocks_no_one(
    make_probe, processes
):
    bad = {
        "timeout_stall": make_probe("sim-fast@fault=stall,after=3"),
        "timeout_total": make_probe("sim-fast@fault=endless,tps=200"),
        "protocol_error": make_probe("sim-fast@fault=huge_event"),
        "garbage": make_probe("sim-fast@fault=html_200"),
    }
    endless = bad["timeout_total"].endpoint.provider
    endless.total_timeout_s = 3
    endless.save()
    good = make_probe("sim-fast")
    worker = processes.worker("w1", concurrency=5)
    make_due(good, *bad.values())

    dispatch_due_probes()

    assert wait_for(lambda: runs_of(good), 10), worker.output()
    assert runs_of(good)[0].status == "ok"
    assert wait_for(lambda: ProbeRun.objects.count() == 5, 20), worker.output()
    for expected in ("timeout_stall", "timeout_total", "protocol_error"):
        (run,) = runs_of(bad[expected])
        assert run.status == expected, (expected, run.status, run.error)
    (garbage,) = runs_of(bad["garbage"])
    assert garbage.status != "ok"
    for run in ProbeRun.objects.select_related("endpoint__provider"):
        limit_ms = run.endpoint.provider.total_timeout_s * 1000
        assert (run.e2e_ms or 0) <= limit_ms + 500, (run.status, run.e2e_ms)


@pytest.fixture
def broker_proxy(clean_redis):
    """A TCP relay in front of the test's Redis, for a worker's broker connection only."""
    from urllib.parse import urlsplit

    from django.conf import settings

    from tests.probes.conftest import TcpProxy

    parts = urlsplit(settings.CELERY_BROKER_URL)
    proxy = TcpProxy(parts.port or 6379)
    proxy.up()
    proxy.url = parts._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
    yield proxy
    proxy.down()


def hold_a_slot_across_a_broker_blink(make_probe, processes, broker_proxy, clean_redis, slot_in):
    """A slot queued with its phase still to come (a countdown), so the worker holds it
    unstarted; the broker connection breaks, and comes back after the countdown ended."""
    from django.conf import settings

    from probes.scheduling import ledger

    probe = make_probe("sim-fast", interval_s=300)
    # Heartbeats and marks on the real Redis: only the broker connection blinks.
    env = {"REDIS_URL": settings.REDIS_URL}
    worker = processes.worker("w1", concurrency=1, broker=broker_proxy.url, env=env)
    assert wait_for(lambda: "ready" in worker.output(), 30), worker.output()
    slot = current_slot()
    next_at = slot + slot_in
    now = datetime.now(UTC)
    ledger.entry_for(probe, slot, next_at, now).save()
    sent = datetime.now(UTC)
    run_probe.apply_async(
        args=[probe.pk, slot.isoformat()], queue="probes.local", countdown=8, expires=next_at
    )
    # kombu keeps a message a worker took, unacked, in this hash until it is acked.
    assert wait_for(lambda: clean_redis.hlen("unacked") == 1, 15), worker.output()
    assert clean_redis.llen("probes.local") == 0
    broker_proxy.down()
    assert wait_for(lambda: "lost" in worker.output().lower(), 15), worker.output()
    # Away past the countdown: the held copy cannot have been handed back and run.
    time.sleep(max(0.0, (sent + timedelta(seconds=10) - datetime.now(UTC)).total_seconds()))
    broker_proxy.up()
    assert wait_for(lambda: worker.output().count("Connected to") >= 2, 30), worker.output()
    return probe, slot, worker


def test_a_slot_held_when_the_broker_connection_breaks_is_re_sent_and_runs(
    make_probe, processes, broker_proxy, clean_redis
):
    # Issue 32: 60 s of Redis away lost the slots the worker held (Celery drops them with
    # the connection; Redis gives them back after an hour, past their expiry).
    from probes.models import DispatchedSlot
    from probes.tasks import sweep_dispatched_slots

    probe, slot, worker = hold_a_slot_across_a_broker_blink(
        make_probe, processes, broker_proxy, clean_redis, timedelta(seconds=300)
    )
    row = DispatchedSlot.objects.get(probe=probe, slot_at=slot)
    due = wait_for(lambda: DispatchedSlot.objects.get(pk=row.pk).deadline <= datetime.now(UTC), 30)
    row.refresh_from_db()
    assert due, (row.state, row.reason, worker.output()[-3000:])
    assert sweep_dispatched_slots()["resent"] == 1
    assert wait_for(lambda: len(runs_of(probe)) == 1, 30), worker.output()
    sweep_dispatched_slots()
    row.refresh_from_db()
    assert (row.state, row.reason_code) == ("done", "ran_after_resend")
    assert [r.slot_at for r in runs_of(probe)] == [slot]


def test_a_dropped_slot_too_late_to_re_send_is_skipped_as_broker_away_not_lost(
    make_probe, processes, broker_proxy, clean_redis
):
    from probes.models import DispatchedSlot
    from probes.tasks import sweep_dispatched_slots

    # Its next slot is due before a re-send could start: re-sending would bunch the two.
    probe, slot, worker = hold_a_slot_across_a_broker_blink(
        make_probe, processes, broker_proxy, clean_redis, timedelta(seconds=16)
    )
    row = DispatchedSlot.objects.get(probe=probe, slot_at=slot)
    assert wait_for(lambda: datetime.now(UTC) > row.next_at, 20)
    report = sweep_dispatched_slots()
    row.refresh_from_db()
    assert report["skipped"] == 1, (report, row.state, row.reason, row.deadline, row.queued_at)
    assert (row.state, row.reason_code) == ("skipped", "broker_away")
    assert "Redis, the broker, went away" in row.reason and runs_of(probe) == []


@pytest.mark.parametrize("when", ["waiting for its cap", "measuring"])
def test_a_slot_in_flight_as_redis_goes_away_ends_as_one_run(
    make_probe, processes, broker_proxy, clean_redis, when
):
    # Issue 32: `make compose-check` lost the slot in flight as Redis (broker, caps and
    # heartbeats: one server) went away for 60 s: the task raised on Redis's connection
    # error, waiting for its cap or releasing it, and its slot never ended.
    from probes.models import DispatchedSlot
    from probes.scheduling import ledger

    probe = make_probe("sim-fast@ttft=4000", interval_s=300)
    env = {"REDIS_URL": broker_proxy.url}
    worker = processes.worker("w1", concurrency=2, broker=broker_proxy.url, env=env)
    assert wait_for(lambda: "ready" in worker.output(), 30), worker.output()
    provider = probe.endpoint.provider
    provider.max_concurrency = 1
    provider.save()
    cap = caps.provider_semaphore(provider)
    other = cap.acquire(clean_redis, "elsewhere") if when == "waiting for its cap" else None
    slot = current_slot()
    ledger.entry_for(probe, slot, slot + timedelta(seconds=300), datetime.now(UTC)).save()
    run_probe.apply_async(args=[probe.pk, slot.isoformat()], queue="probes.local")
    row = DispatchedSlot.objects.get(probe=probe, slot_at=slot)
    assert wait_for(lambda: DispatchedSlot.objects.get(pk=row.pk).state == "started", 15)
    if other:  # its ticket is in the cap's queue
        assert wait_for(lambda: clean_redis.keys("inferwatch:wait:*"), 10), worker.output()
    else:  # measuring: it holds the cap
        assert wait_for(lambda: cap.holders(clean_redis) == 1, 10), worker.output()
    broker_proxy.down()
    time.sleep(8)
    broker_proxy.up()
    if other:
        cap.release(clean_redis, other)
    assert wait_for(lambda: DispatchedSlot.objects.get(pk=row.pk).state == "done", 60), (
        worker.output()[-4000:]
    )
    [run] = runs_of(probe)
    assert (run.slot_at, run.status) == (slot, "ok")
