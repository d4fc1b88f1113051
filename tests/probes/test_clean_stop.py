"""Lost means lost: a slot a clean stop (Ctrl-C, SIGTERM, a deploy) leaves behind is
skipped or re-sent, never lost; a slot a worker's death leaves is settled at the next
sweep, and /status names the cause the sweeper knew (probes/scheduling/ledger.py)."""

from __future__ import annotations

import signal
import time
from datetime import UTC, datetime, timedelta

import pytest

from probes.models import DispatchedSlot, Probe, ProbeRun
from probes.scheduling import caps, dispatch, heartbeat, ledger
from probes.tasks import run_probe, sweep_dispatched_slots
from tests.probes.conftest import current_slot, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def claimed(probe) -> DispatchedSlot:
    Probe.objects.filter(pk=probe.pk).update(next_run_at=datetime.now(UTC) - timedelta(seconds=1))
    dispatch.dispatch_due(lambda slot: None)
    return DispatchedSlot.objects.get(probe=probe)


def overdue(row: DispatchedSlot) -> datetime:
    """Past the slot's next one: too late to re-send."""
    return row.next_at + timedelta(seconds=1)


def test_a_queued_slot_a_clean_stop_left_is_skipped_not_lost(make_probe):
    row = claimed(make_probe(interval_s=60))
    stopped = {"local@box": row.queued_at + timedelta(seconds=2)}

    report = ledger.sweep(lambda r: None, overdue(row), known=ledger.Known(stopped=stopped))

    row.refresh_from_db()
    assert (report.skipped, report.lost, row.state) == (1, 0, "skipped")
    assert row.reason.startswith("Skipped: stopped before it could start: local@box stopped")


@pytest.mark.parametrize(
    ("stopped", "started_after_s", "killed", "state"),
    [
        (True, None, False, "skipped"),  # stopped cleanly, not back yet
        (True, 20, False, "skipped"),  # queued before it was back
        (False, 20, False, "skipped"),  # its Redis forgot the stop: started after it
        (False, -30, False, "skipped"),  # still working through the restart's queue
        (True, -300, False, "lost"),  # long after its restart: the queue backed up
        (False, 20, True, "lost"),  # it died and was restarted: not a stop
    ],
)
def test_a_slot_queued_while_its_worker_restarted_is_skipped(
    make_probe, stopped, started_after_s, killed, state
):
    """`make run` restarted: its beat queues slots before its worker is ready; those the
    worker could not start in time were stopped by the restart. Long after the restart,
    a slot left in the queue is lost (the queue backed up)."""
    row = claimed(make_probe(interval_s=60))
    at = row.queued_at
    known = ledger.Known(
        stopped={"local@box": at - timedelta(minutes=10)} if stopped else {},
        started={}
        if started_after_s is None
        else {"local@box": at + timedelta(seconds=started_after_s)},
        killed={"local@box": at + timedelta(seconds=19)} if killed else {},
        alive=1,
    )

    ledger.sweep(lambda r: None, overdue(row), known=known)

    row.refresh_from_db()
    assert row.state == state, row.reason
    if state == "skipped":
        assert row.reason.startswith("Skipped: stopped before it could start: local@box")


def test_a_started_slot_its_stopped_worker_could_not_finish_is_skipped(make_probe):
    probe = make_probe(interval_s=60)
    row = claimed(probe)
    ledger.mark_started(probe, row.slot_at, "local@box")
    # Stopped and not started again: its heartbeat went quiet, but it was no death.
    known = ledger.Known(stopped={"local@box": datetime.now(UTC)}, silent={"local@box"})

    ledger.sweep(lambda r: None, overdue(row), known=known)

    row.refresh_from_db()
    assert row.state == "skipped"
    assert "stopped before it could finish: local@box was stopped" in row.reason


def test_a_clean_stop_re_sends_what_can_still_start_on_time(make_probe):
    row = claimed(make_probe(interval_s=600))
    resent: list = []
    known = ledger.Known(stopped={"local@box": datetime.now(UTC)})
    ledger.sweep(resent.append, row.deadline + timedelta(seconds=1), known=known)
    row.refresh_from_db()
    assert (row.state, len(resent)) == ("retried", 1)
    assert row.reason.startswith("Re-sent: stopped before it could start")


@pytest.mark.parametrize(
    ("known", "cause"),
    [
        (ledger.Known(alive=0), "no worker running"),
        (ledger.Known(alive=1), "queue backed up"),
        (
            ledger.Known(alive=1, db_away={"local@box": datetime.now(UTC) + timedelta(hours=1)}),
            "database away",
        ),
    ],  # fmt: skip
)
def test_a_lost_slot_names_the_cause_the_sweeper_knew(make_probe, client, known, cause):
    row = claimed(make_probe(interval_s=60))
    ledger.sweep(lambda r: None, overdue(row), known=known)
    row.refresh_from_db()
    assert row.state == "lost"
    assert row.reason.startswith(f"Lost ({cause}): ")
    check = next(c for c in client.get("/status.json").json()["checks"] if c["name"] == "slots")
    assert f"(1 {cause})" in check["message"]
    assert "a worker died or the queue backed up" not in check["message"]


def test_a_worker_restarted_after_dying_settles_its_slots_at_the_next_sweep(make_probe):
    probe = make_probe(interval_s=60)
    row = claimed(probe)
    ledger.mark_started(probe, row.slot_at, "local@box")
    row.refresh_from_db()
    assert row.deadline > datetime.now(UTC) + timedelta(minutes=1)  # a run budget away

    assert ledger.abandon_started("local@box") == 1  # what worker_init does on a restart
    known = ledger.Known(killed={"local@box": datetime.now(UTC)}, alive=1)
    ledger.sweep(lambda r: None, overdue(row), known=known)

    row.refresh_from_db()
    assert row.state == "lost"
    assert row.reason.startswith(
        "Lost (worker killed): started on local@box, which restarted without a clean stop"
    )


# -- a real worker stopped with SIGTERM --------------------------------------------------------


@pytest.mark.worker
def test_sigterm_skips_the_slot_waiting_for_a_cap_and_finishes_the_one_running(
    make_probe, processes, clean_redis
):
    slow = make_probe("sim-fast@tps=20", interval_s=60)  # 60 tokens: ~3 s
    provider = slow.endpoint.provider
    provider.max_concurrency = 1
    provider.save()
    waiting = make_probe("sim-fast", provider=provider, interval_s=60)
    worker = processes.worker("w1", concurrency=2)
    slot = current_slot()
    for probe in (slow, waiting):
        DispatchedSlot.objects.create(
            probe=probe, slot_at=slot, region="local", queued_at=slot,
            deadline=slot + timedelta(minutes=5), next_at=slot + timedelta(minutes=1),
        )  # fmt: skip
    run_probe.apply_async(args=[slow.pk, slot.isoformat()], queue="probes.local")
    assert wait_for(lambda: caps.provider_semaphore(provider).holders(clean_redis), 10)
    run_probe.apply_async(args=[waiting.pk, slot.isoformat()], queue="probes.local")
    assert wait_for(lambda: DispatchedSlot.objects.filter(probe=waiting, state="started"), 10)

    time.sleep(0.3)
    worker.proc.send_signal(signal.SIGTERM)
    worker.proc.wait(30)

    states = dict(DispatchedSlot.objects.values_list("probe_id", "state"))
    assert states == {slow.pk: "done", waiting.pk: "skipped"}, worker.output()
    reason = DispatchedSlot.objects.get(probe=waiting).reason
    assert reason == "Skipped: stopped before it could start (its worker was shutting down)."
    assert ProbeRun.objects.filter(probe=slow).exists()
    assert worker.name in heartbeat.read_heartbeats("stopped")
    # The sweep after the restart finds nothing to call lost.
    assert sweep_dispatched_slots()["lost"] == 0
