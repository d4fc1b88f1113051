"""No dispatched slot vanishes: the slot ledger re-sends or reports what a dead worker left.

A worker killed whole leaves its message unacked in Redis for an hour, past the task's
`expires`; the ledger's sweeper is what keeps that slot from silently disappearing.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from probes.models import DispatchedSlot, Probe, ProbeRun
from probes.recording import recorder
from probes.scheduling import caps, dispatch, ledger
from probes.scheduling.heartbeat import read_heartbeats
from probes.slots import run as runner
from probes.tasks import (
    dispatch_due_probes,
    prune_raw_runs,
    resend_slot,
    run_probe,
    sweep_dispatched_slots,
)
from tests.probes.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def make_due(*probes):
    Probe.objects.filter(pk__in=[p.pk for p in probes]).update(
        next_run_at=datetime.now(UTC) - timedelta(seconds=1)
    )


def claim_without_sending(*probes) -> list[dispatch.Slot]:
    make_due(*probes)
    return dispatch.dispatch_due(lambda slot: None)


def restore_unacked(client) -> int:
    """What Redis does with a dead consumer's messages once visibility_timeout (an hour)
    has passed: put them back on their queue."""
    restored = 0
    for tag, raw in client.hgetall("unacked").items():
        message, _exchange, routing_key = json.loads(raw)
        client.rpush(routing_key, json.dumps(message))
        client.hdel("unacked", tag)
        client.zrem("unacked_index", tag)
        restored += 1
    return restored


def slots_check(client) -> dict:
    checks = client.get("/status?format=json").json()["checks"]
    return next(c for c in checks if c["name"] == "slots")


@pytest.mark.worker
def test_a_slot_whose_whole_worker_was_killed_is_re_sent_and_recorded_exactly_once(
    make_probe, processes, clean_redis
):
    probe = make_probe("sim-fast@ttft=2500", interval_s=600)
    doomed = processes.worker("doomed", concurrency=1, own_session=True)
    holders = caps.provider_semaphore(probe.endpoint.provider)
    make_due(probe)

    assert dispatch_due_probes() == 1
    assert wait_for(lambda: holders.holders(clean_redis) == 1, 15), doomed.output()
    os.killpg(doomed.proc.pid, signal.SIGKILL)  # main process and children, mid-request
    doomed.proc.wait(timeout=10)

    slot = DispatchedSlot.objects.get(probe=probe)
    assert (slot.state, slot.worker) == ("started", doomed.name)
    assert clean_redis.hlen("unacked") == 1  # back on the queue only in an hour
    assert not ProbeRun.objects.exists()  # nothing half-written

    # A minute without its heartbeat: the sweeper takes the worker for dead, long before
    # the slot's own deadline (the provider's total timeout and a grace).
    beats = read_heartbeats("worker", clean_redis)
    now = beats[doomed.name] + timedelta(seconds=ledger.WORKER_SILENT_AFTER_S + 1)
    assert now < slot.deadline
    report = ledger.sweep(resend_slot, now, ledger.silent_workers(beats, now))
    assert (report.resent, report.lost) == (1, 0)
    # As the sweeper does (sweep_dispatched_slots): the dead worker's caps and its turn on
    # the endpoint are freed, or the re-sent copy would wait for their leases.
    silent_since = now - timedelta(seconds=ledger.WORKER_SILENT_AFTER_S)
    assert caps.release_silent_workers(beats, silent_since, clean_redis)[doomed.name] >= 2
    survivor = processes.worker("survivor", concurrency=1)
    assert wait_for(lambda: _state(slot) == "done", 25), survivor.output()

    # An hour on, Redis hands the dead worker's copy out again: it is not run twice.
    # (The survivor acks its copy just after the slot is done: wait for that first.)
    assert wait_for(lambda: clean_redis.hlen("unacked") == 1, 10)
    assert restore_unacked(clean_redis) == 1
    assert wait_for(lambda: "already settled" in survivor.output(), 15), survivor.output()
    (run,) = ProbeRun.objects.filter(probe=probe)
    slot.refresh_from_db()
    assert (run.slot_at, run.status, run.worker) == (slot.slot_at, "ok", survivor.name)
    assert slot.attempts == 2
    assert f"started on {doomed.name}, which stopped sending heartbeats" in slot.reason


def _state(slot: DispatchedSlot) -> str:
    return DispatchedSlot.objects.values_list("state", flat=True).get(pk=slot.pk)


def test_a_slot_too_late_to_re_send_is_recorded_lost_and_shown_on_status(
    make_probe, client, clean_redis
):
    probe = make_probe(interval_s=60)
    make_due(probe)
    dispatch_due_probes()  # no worker of its region is running
    slot = DispatchedSlot.objects.get(probe=probe)

    report = ledger.sweep(resend_slot, now=slot.next_at)

    # Not started by its next slot, its task has expired: lost then, not a budget later.
    assert slot.deadline == slot.next_at
    assert (report.resent, report.lost) == (0, 1)
    slot.refresh_from_db()
    assert slot.state == "lost"
    assert "no worker of region local started it" in slot.reason
    assert not ProbeRun.objects.exists()  # our failure: no run, no dent in availability
    check = slots_check(client)
    assert check["state"] == "warn"
    assert check["message"].startswith("1 dispatched slot(s) lost in the last 24 h")
    assert check["details"][0]["probe"] == str(probe)
    # The vocabulary's words (probes/scheduling/outcomes.py), the particulars beside them.
    assert slot.reason_code == "queue_backed_up"
    assert check["details"][0]["reason"] == "queue backed up"
    assert check["details"][0]["detail"] == slot.reason
    assert "1 queue backed up" in check["message"]
    assert slot.reason in client.get("/status").content.decode()  # people see it too


def test_a_slot_is_re_sent_once_and_lost_if_the_second_worker_dies_too(make_probe):
    probe = make_probe(interval_s=600)
    (claimed,) = claim_without_sending(probe)
    resent: list[DispatchedSlot] = []

    ledger.mark_started(probe, claimed.slot_at, "gone-1@box")
    row = DispatchedSlot.objects.get(probe=probe)
    assert ledger.sweep(resent.append, now=row.deadline + timedelta(seconds=1)).resent == 1
    ledger.mark_started(probe, claimed.slot_at, "gone-2@box")
    row.refresh_from_db()
    report = ledger.sweep(resent.append, now=row.deadline + timedelta(seconds=1))

    assert (report.resent, report.lost, len(resent)) == (0, 1, 1)
    row.refresh_from_db()
    assert (row.state, row.attempts) == ("lost", 2)
    assert "gone-2@box" in row.reason and "already re-sent once" in row.reason


def test_a_slot_on_a_worker_still_heart_beating_waits_for_its_deadline(make_probe):
    probe = make_probe(interval_s=600)
    (claimed,) = claim_without_sending(probe)
    ledger.mark_started(probe, claimed.slot_at, "alive@box")
    now = datetime.now(UTC)
    resent: list[DispatchedSlot] = []

    fresh = {"alive@box": now - timedelta(seconds=5)}
    assert ledger.sweep(resent.append, now, ledger.silent_workers(fresh, now)).resent == 0
    quiet = {"alive@box": now - timedelta(seconds=ledger.WORKER_SILENT_AFTER_S + 1)}
    assert ledger.sweep(resent.append, now, ledger.silent_workers(quiet, now)).resent == 1
    assert [row.probe_id for row in resent] == [probe.pk]


def test_a_slot_whose_run_was_recorded_is_done_and_never_swept(make_probe):
    probe = make_probe(interval_s=600)
    (claimed,) = claim_without_sending(probe)
    resent: list[DispatchedSlot] = []

    run_probe.apply(args=[probe.pk, claimed.slot_at.isoformat()])

    row = DispatchedSlot.objects.get(probe=probe)
    assert row.state == "done" and row.closed_at is not None
    far_future = claimed.next_at + timedelta(days=1)
    assert ledger.sweep(resent.append, now=far_future) == ledger.SweepReport()
    assert resent == []
    assert ProbeRun.objects.filter(probe=probe).count() == 1


def test_a_recorded_run_the_worker_could_not_mark_done_is_closed_by_the_sweeper(make_probe):
    probe = make_probe(interval_s=600)
    (claimed,) = claim_without_sending(probe)
    resent: list[DispatchedSlot] = []
    # Recorded, but the worker died (or the database blinked) before marking it done.
    runner.run_slot(probe, claimed.slot_at, "w@box", probe.region)
    row = DispatchedSlot.objects.get(probe=probe)

    report = ledger.sweep(resent.append, now=row.deadline + timedelta(seconds=1))

    assert (report.done, report.resent, report.lost, resent) == (1, 0, 0, [])
    assert _state(row) == "done"


def test_the_sweeper_writes_spooled_runs_first_so_their_slots_count_as_done(
    make_probe, clean_redis
):
    probe = make_probe(interval_s=600)
    (claimed,) = claim_without_sending(probe)
    runner.run_slot(probe, claimed.slot_at, "w@box", probe.region)
    # As if the database had been away when the run finished: the run waits in the spool.
    run = ProbeRun.objects.get()
    fields = {f.attname: getattr(run, f.attname) for f in run._meta.concrete_fields}
    del fields["id"]
    recorder.spool(fields)
    run.delete()
    DispatchedSlot.objects.update(deadline=datetime.now(UTC) - timedelta(seconds=1))

    assert sweep_dispatched_slots() == {"done": 1, "resent": 0, "skipped": 0, "lost": 0}
    assert ProbeRun.objects.get().slot_at == claimed.slot_at
    assert clean_redis.llen(recorder.SPOOL_KEY) == 0


def test_two_sweepers_at_once_re_send_each_slot_once(make_probe):
    probes = [make_probe(interval_s=600) for _ in range(15)]
    claim_without_sending(*probes)
    after_deadlines = max(DispatchedSlot.objects.values_list("deadline", flat=True))
    after_deadlines += timedelta(seconds=1)
    resent: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(2)

    def record(row: DispatchedSlot) -> None:
        with lock:
            resent.append(row.probe_id)

    def sweeper() -> None:
        start.wait()
        try:
            ledger.sweep(record, now=after_deadlines)
        finally:
            connection.close()

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(resent) == sorted(p.pk for p in probes)
    assert set(DispatchedSlot.objects.values_list("state", "attempts")) == {("retried", 2)}


def test_every_claimed_slot_is_on_the_ledger_and_an_unsent_one_is_not(make_probe):
    sent, unsent = make_probe(interval_s=600), make_probe()
    make_due(sent, unsent)

    def broker_down_for(slot: dispatch.Slot) -> None:
        if slot.probe_id == unsent.pk:
            raise ConnectionError("redis away")

    with pytest.raises(ConnectionError):
        dispatch.dispatch_due(broker_down_for)

    (row,) = DispatchedSlot.objects.all()
    assert (row.probe_id, row.state, row.attempts) == (sent.pk, "queued", 1)
    budget = timedelta(seconds=sent.endpoint.provider.total_timeout_s + ledger.GRACE_S)
    assert budget <= row.deadline - row.slot_at < budget + timedelta(seconds=5)
    assert row.next_at == Probe.objects.get(pk=sent.pk).next_run_at


def test_ledger_rows_are_pruned_with_the_raw_runs(make_probe, settings):
    settings.RAW_RUN_RETENTION_DAYS = 30
    probe = make_probe()
    now = datetime.now(UTC)

    def entry(days_ago: int) -> DispatchedSlot:
        slot_at = now - timedelta(days=days_ago)
        return ledger.entry_for(probe, slot_at, slot_at + timedelta(minutes=1), slot_at)

    DispatchedSlot.objects.bulk_create([entry(40), entry(31), entry(2)])

    prune_raw_runs()

    (kept,) = DispatchedSlot.objects.all()
    assert kept.slot_at == now - timedelta(days=2)


def test_the_admin_lists_the_ledger_read_only(make_probe, admin_client):
    probe = make_probe()
    claim_without_sending(probe)

    page = admin_client.get("/admin/probes/dispatchedslot/")

    assert page.status_code == 200
    assert str(probe.endpoint.model_id) in page.content.decode()
    assert admin_client.get("/admin/probes/dispatchedslot/add/").status_code == 403


def test_a_slot_dispatched_again_reopens_its_ledger_row(make_probe):
    probe = make_probe(interval_s=600)
    (first,) = claim_without_sending(probe)
    DispatchedSlot.objects.update(state="lost", attempts=2, reason="Lost: test.")

    # The admin moves the probe back onto that very slot time.
    Probe.objects.filter(pk=probe.pk).update(next_run_at=first.slot_at, last_dispatched_at=None)
    (again,) = dispatch.dispatch_due(lambda slot: None)

    assert again.slot_at == first.slot_at
    row = DispatchedSlot.objects.get()
    assert (row.state, row.attempts, row.reason, row.closed_at) == ("queued", 1, "", None)


def test_beat_sweeps_the_ledger_every_minute_and_drops_stale_sweeps():
    from dashboard.celery import app

    entry = app.conf.beat_schedule["sweep-dispatched-slots"]

    assert entry["task"] == "probes.tasks.sweep_dispatched_slots"
    assert entry["schedule"] == 60.0
    assert entry["options"]["expires"] < 60


def test_rollups_and_snapshots_are_maintained_at_the_top_of_every_minute():
    from celery.schedules import crontab

    from dashboard.celery import app

    entry = app.conf.beat_schedule["maintain-rollups"]
    # The hour turns at second 0 of a minute: run then, not up to a minute later.
    assert entry["schedule"] == crontab(minute="*")
    assert entry["options"]["expires"] < 60


def test_a_slot_taken_with_the_database_away_waits_for_its_run_not_called_lost(
    make_probe, clean_redis
):
    # Issue 32 (make compose-check, Postgres away 60 s): slots the worker ran on its last
    # reads were called lost ("queue backed up") at their deadlines while their runs were
    # still on the way through the recorder's retries and the spool.
    from probes.tasks import _taken_offline

    probe = make_probe(interval_s=60)
    (claimed,) = claim_without_sending(probe)
    row = DispatchedSlot.objects.get(probe=probe)
    _taken_offline(probe.pk, claimed.slot_at, "w@box")  # as run_probe marks it
    # Past its deadline, too late to re-send: without the mark, lost now.
    now = datetime.now(UTC)
    DispatchedSlot.objects.update(deadline=now - timedelta(seconds=1), next_at=now)

    assert sweep_dispatched_slots() == {"done": 0, "resent": 0, "skipped": 0, "lost": 0}
    assert _state(row) == "queued"
    runner.run_slot(probe, claimed.slot_at, "w@box", probe.region)  # the run arrives
    assert sweep_dispatched_slots()["done"] == 1
    assert _state(row) == "done"


def test_a_slot_taken_offline_whose_run_never_came_is_lost_to_the_database(make_probe):
    probe = make_probe(interval_s=60)
    (claimed,) = claim_without_sending(probe)
    row = DispatchedSlot.objects.get(probe=probe)
    taken = datetime.now(UTC)
    known = ledger.Known(
        offline={ledger.offline_slot(probe.pk, claimed.slot_at): taken},
        db_away={"w@box": taken},  # marked with it (tasks._taken_offline)
    )

    later = taken + ledger.OFFLINE_PATIENCE + timedelta(seconds=1)
    assert ledger.sweep(resend_slot, now=later, known=known).lost == 1
    row.refresh_from_db()
    assert (row.state, row.reason_code) == ("lost", "database_away")


def test_a_slot_taken_offline_then_skipped_is_closed_as_skipped_not_waited_for(
    make_probe, clean_redis, monkeypatch
):
    # make compose-check, Postgres away: two slots taken on the worker's last reads were
    # then skipped (their endpoint busy); the skip could not reach the ledger, and the
    # sweeper waited for runs that would never come.
    from django.db import OperationalError

    from probes import tasks
    from probes.scheduling.outcomes import SlotReason

    probe = make_probe(interval_s=60)
    (claimed,) = claim_without_sending(probe)
    row = DispatchedSlot.objects.get(probe=probe)
    tasks._taken_offline(probe.pk, claimed.slot_at, "w@box")

    def away(*args):
        raise OperationalError("the database is away")

    monkeypatch.setattr(ledger, "mark_skipped", away)
    reason = "Skipped: endpoint busy; it could not start within its lateness budget."
    tasks._settle_quietly(
        ledger.mark_skipped, probe.pk, claimed.slot_at, SlotReason.CAP_BUSY, reason
    )
    monkeypatch.undo()
    now = datetime.now(UTC)
    DispatchedSlot.objects.update(deadline=now - timedelta(seconds=1), next_at=now)

    assert sweep_dispatched_slots()["skipped"] == 1
    row.refresh_from_db()
    assert (row.state, row.reason_code, row.reason) == ("skipped", "cap_busy", reason)
