"""Celery tasks: thin wrappers over dispatch, runner, the slot ledger and retention.

(Rollup maintenance reads what these write: dashboard/tasks.py.)

JSON arguments, primary keys only. Probe runs are acked late and rejected (requeued)
when their worker process dies, so a killed worker's slot runs again elsewhere; the
(probe, slot, request) unique key makes that redelivery idempotent. A worker killed
whole leaves its message unacked for an hour, past `expires`: the slot ledger's sweeper
(probes/scheduling/ledger.py) re-sends such a slot or records it lost, so none silently vanishes.
"""

from __future__ import annotations

import logging
import platform
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial

import redis
from celery import shared_task
from celery.signals import task_retry, worker_init, worker_shutting_down
from celery.utils.nodenames import worker_direct
from django.conf import settings
from django.db import InterfaceError, OperationalError, connections

from probes.models import DispatchedSlot, Probe, WorkerCalibration
from probes.onboarding.calibration import calibrate
from probes.recording import recorder, retention, standby
from probes.scheduling import (
    caps,
    dispatch,
    heartbeat,
    lateness,
    ledger,
    maintenance,
    offline_outcomes,
)
from probes.scheduling.outcomes import SlotReason
from probes.slots import run as runner

log = logging.getLogger(__name__)

# A slot's requests are each bounded by the provider's own limits (total timeout); this
# is the backstop for a worker stuck outside them.
RUN_SOFT_TIME_LIMIT_S = 1500
RUN_TIME_LIMIT_S = 1560
# A run with no slot (sent by hand) waits this long for a full cap before giving up.
UNSCHEDULED_WAIT_S = 60.0
DB_ERRORS = (OperationalError, InterfaceError)


def _worker_name(task) -> str:
    return task.request.hostname or f"celery@{platform.node()}"


@worker_init.connect
def _free_slots_of_a_previous_run(sender, **kwargs) -> None:
    """A worker starting under a name whose slots are taken restarts after a crash
    (`make run`'s supervisor, Compose's restart policy): the old process is dead, so its
    slots are freed now rather than when their leases run out. Before any task is taken."""
    try:
        freed = caps.release_worker_slots(sender.hostname)
        clean = heartbeat.starting_again(sender.hostname)
        heartbeat.record_mark("started", sender.hostname)
    except redis.RedisError as exc:
        log.warning("Could not free the slots of a previous %s (%s)", sender.hostname, exc)
        return
    if freed:
        how = "that stopped" if clean else "that died"
        log.warning("Freed %d slot(s) held by a previous %s %s", freed, sender.hostname, how)
    _settle_previous_run(sender.hostname, clean)
    _read_probes_ahead(sender.hostname)


def _read_probes_ahead(worker: str) -> None:
    """Its region's probes, read before any slot: a slot taken as the database goes away
    runs on them (probes/recording/standby.py)."""
    try:
        standby.warm(settings.PROBE_REGION, worker)
    except DB_ERRORS as exc:
        log.warning("Could not read the probes ahead (%s): each is read by its first slot", exc)
    finally:
        connections.close_all()  # before the pool forks: no connection shared by children


def _settle_previous_run(worker: str, clean: bool) -> None:
    """Slots the previous run of this worker left started are settled by the next sweep
    (re-sent, or skipped after a clean stop, or lost to a worker killed), not at a
    deadline an hour away."""
    try:
        abandoned = ledger.abandon_started(worker)
    except DB_ERRORS as exc:
        log.warning("Could not look for slots a previous %s left (%s)", worker, exc)
        return
    finally:
        connections.close_all()  # before the pool forks: no connection shared by children
    if abandoned and not clean:
        heartbeat.record_mark("killed", worker)
    if abandoned:
        how = "stopped" if clean else "died"
        log.warning("%d slot(s) were started by a previous %s that %s", abandoned, worker, how)


@worker_shutting_down.connect
def _stopping(sender, **kwargs) -> None:
    """Ctrl-C, SIGTERM, a deploy: slots waiting for a cap give their turn up at once
    (skipped, "stopped before it could start"), and what the stop leaves open is recorded
    as stopped, not lost."""
    heartbeat.mark_stopping(str(sender))
    try:  # in the database too: a kill after the grace must not turn the stop into a loss
        ledger.mark_stop_requested(str(sender))
    except DB_ERRORS as exc:
        log.warning("Could not record the stop of %s on its slots (%s)", sender, exc)


@task_retry.connect
def _database_away(sender=None, request=None, reason=None, **kwargs) -> None:
    # The sweeper then names the database, not a guess, for a slot this leaves lost.
    if isinstance(reason, DB_ERRORS):
        heartbeat.record_mark("db-away", (request and request.hostname) or platform.node())


def send_slot(slot: dispatch.Slot) -> None:
    """Queue one slot's run on its region's queue, expiring at the probe's next slot."""
    run_probe.apply_async(
        args=[slot.probe_id, slot.slot_at.isoformat()],
        queue=slot.queue,
        countdown=slot.delay_s,
        expires=slot.next_at,
    )


def resend_slot(row: DispatchedSlot) -> None:
    """The sweeper's re-send of an overdue slot: now, on the same terms as the first."""
    send_slot(dispatch.Slot(row.probe_id, row.region, row.slot_at, row.next_at, 0.0))


@shared_task(acks_late=True, ignore_result=True, time_limit=120, soft_time_limit=100)
def dispatch_due_probes() -> int:
    """Beat's tick: claim due probes and queue their slots on their region's queue."""
    heartbeat.record_beat_tick()
    return len(dispatch.dispatch_due(send_slot))


@shared_task(acks_late=True, ignore_result=True, time_limit=120, soft_time_limit=100)
def sweep_dispatched_slots() -> dict:
    """Every minute: settle dispatched slots past their deadline (re-send or report lost),
    and free the request slots of workers that stopped sending heartbeats."""
    recorder.drain_spool()  # a spooled run counts as recorded once it is written
    now = datetime.now(UTC)
    try:
        beats = heartbeat.read_heartbeats("worker")
        kinds = ("stopped", "started", "killed", "db-away", "broker-away", "offline-slot")
        marks = {kind: heartbeat.read_heartbeats(kind) for kind in kinds}
        skipped_offline = offline_outcomes.kept_skips()
    except redis.RedisError:
        # No heartbeats to judge by: deadlines and leases alone.
        beats, marks, skipped_offline = None, {}, {}
    known = ledger.Known(
        stopped=marks.get("stopped", {}),
        started=marks.get("started", {}),
        killed=marks.get("killed", {}),
        db_away=marks.get("db-away", {}),
        broker_away=marks.get("broker-away", {}),
        offline=marks.get("offline-slot", {}),
        skipped_offline=skipped_offline,
    )
    if beats is not None:
        fresh = now - timedelta(seconds=ledger.WORKER_SILENT_AFTER_S)
        alive = sum(1 for when in beats.values() if when >= fresh)
        known = replace(known, silent=ledger.silent_workers(beats, now), alive=alive)
        _free_slots_of_silent_workers(beats, now)
    report = ledger.sweep(resend_slot, now, known=known)
    return {
        "done": report.done,
        "resent": report.resent,
        "skipped": report.skipped,
        "lost": report.lost,
    }


def _free_slots_of_silent_workers(beats: dict, now: datetime) -> None:
    silent_since = now - timedelta(seconds=ledger.WORKER_SILENT_AFTER_S)
    try:
        freed = caps.release_silent_workers(beats, silent_since)
    except redis.RedisError as exc:
        log.warning("Could not free the slots of silent workers (%s); their leases will", exc)
        return
    for worker, count in freed.items():
        log.warning("Worker %s stopped sending heartbeats: freed its %d slot(s)", worker, count)


def _settle_quietly(close, *args) -> None:
    # The run is recorded (or spooled) already: a database blip here must not retry the
    # task and measure again. The sweeper closes the slot later from the recorded run.
    try:
        close(*args)
    except DB_ERRORS as exc:
        log.warning("Could not update the slot ledger (%s); the sweeper will", exc)
        if close is ledger.mark_skipped:  # no run will come: the sweeper needs the why
            probe_id, slot_at, code, reason = args
            name = ledger.offline_slot(probe_id, slot_at)
            offline_outcomes.keep_skip(name, SlotReason(code).value, reason)


@shared_task(
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    soft_time_limit=RUN_SOFT_TIME_LIMIT_S,
    time_limit=RUN_TIME_LIMIT_S,
    autoretry_for=DB_ERRORS,
    retry_backoff=True,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=20,
)
def run_probe(self, probe_id: int, slot_iso: str | None = None) -> dict | None:
    """Measure one slot of one probe (slot_iso None: an unscheduled, manual run)."""
    slot_at = datetime.fromisoformat(slot_iso) if slot_iso else None
    worker = _worker_name(self)
    reads = _slot_reads(probe_id, slot_at, worker)
    if reads is None:
        return None
    probe = reads.probe
    if slot_at is not None and lateness.too_late(
        probe, slot_at, datetime.now(UTC), floor_s=2 * settings.DISPATCH_INTERVAL_S
    ):
        # A copy that waited (a backed-up queue, a restart, a re-send): running it now
        # would bunch it with the next slot. Skipped, never a catch-up burst.
        late_s = (datetime.now(UTC) - slot_at).total_seconds()
        reason = f"Skipped: would have started {late_s:,.0f} s after its slot; not run late."
        _settle_quietly(ledger.mark_skipped, probe.pk, slot_at, SlotReason.STARTED_LATE, reason)
        log.info("Probe %s slot %s: %s", probe_id, slot_iso, reason)
        return None
    window = slot_at and maintenance.active(reads.windows, slot_at)
    if window:  # planned: the operator asked for no requests now
        reason = maintenance.skip_reason(window)
        _settle_quietly(ledger.mark_skipped, probe.pk, slot_at, SlotReason.MAINTENANCE, reason)
        log.info("Probe %s slot %s: in maintenance window %s", probe_id, slot_iso, window)
        return None
    try:
        outcome = runner.run_slot(
            probe, slot_at, worker, probe.region, wait=_wait(probe, slot_at, worker)
        )
    except caps.CapsAway as away:
        reason = f"Skipped: {away}; it could not start within its lateness budget."
        return _skip(probe, slot_at, SlotReason.BROKER_AWAY, reason)
    except caps.Busy as busy:
        # Waited its turn for as long as it could still start on time: skipped at once,
        # saying which cap was full and who held it (one line, no retry).
        reason = f"Skipped: {busy.reason}; it could not start within its lateness budget."
        return _skip(probe, slot_at, SlotReason.CAP_BUSY, reason)
    except caps.Stopped:
        reason = "Skipped: stopped before it could start (its worker was shutting down)."
        return _skip(probe, slot_at, SlotReason.STOPPED, reason)
    except caps.TooNarrow as narrow:
        # Retrying cannot help until an operator raises the cap: say so on the ledger.
        log.warning("Probe %s slot %s skipped: %s", probe_id, slot_iso, narrow)
        if slot_at is not None:
            code = SlotReason.CAP_TOO_NARROW
            _settle_quietly(ledger.mark_skipped, probe.pk, slot_at, code, str(narrow))
        return None
    except runner.BackingOff as backing_off:
        expires = self.request.expires and datetime.fromisoformat(self.request.expires)
        if expires and backing_off.until >= expires:
            log.info("Probe %s slot %s skipped: %s", probe_id, slot_iso, backing_off)
            if slot_at is not None:
                code, why = SlotReason.PROVIDER_BACKING_OFF, str(backing_off)
                _settle_quietly(ledger.mark_skipped, probe.pk, slot_at, code, why)
            return None
        raise self.retry(eta=backing_off.until, max_retries=None, expires=expires) from None
    if slot_at is not None:
        _settle_quietly(ledger.mark_done, probe.pk, slot_at)
    return {
        "statuses": [r.status for r in outcome.results],
        "already_recorded": outcome.already_recorded,
        "spooled": outcome.spooled,
    }


def _slot_reads(probe_id: int, slot_at: datetime | None, worker: str) -> standby.Reads | None:
    """The probe and its maintenance windows, and the slot marked started on the ledger;
    None if there is nothing to run. With the database away, this worker's last read of
    the probe stands in (probes/recording/standby.py) and the ledger waits for the sweeper;
    a probe it never read raises, and the task retries."""
    try:
        probe = Probe.objects.select_related("endpoint__provider", "workload").filter(pk=probe_id)
        probe = probe.first()
        if probe is None:
            log.info(
                "Probe %s was deleted before its slot %s ran; nothing to do", probe_id, slot_at
            )
            return None
        windows = maintenance.pausing_windows(probe.endpoint)
    except DB_ERRORS as exc:
        kept = standby.recall(probe_id)
        if kept is None:
            raise
        log.warning(
            "Database away (%s): probe %s slot %s runs on this worker's last read of it",
            exc,
            probe_id,
            slot_at,
        )
        _taken_offline(probe_id, slot_at, worker)
        return kept
    standby.keep(probe, windows)
    if slot_at is None:
        return standby.recall(probe_id)
    try:
        started = ledger.mark_started(probe, slot_at, worker)
    except DB_ERRORS as exc:
        log.warning(
            "Could not mark slot %s of probe %s started (%s); the sweeper will close "
            "it from its run",
            slot_at,
            probe_id,
            exc,
        )
        _taken_offline(probe_id, slot_at, worker)
        started = True
    if not started:
        # A late copy (a redelivered message after the sweeper re-sent or closed it).
        log.info("Probe %s slot %s is already settled; not run again", probe_id, slot_at)
        return None
    return standby.recall(probe_id)


def _taken_offline(probe_id: int, slot_at: datetime | None, worker: str) -> None:
    """The slot runs while the database is away: its run reaches the database only later
    (the recorder's retries, then the spool). Marked in Redis so the sweeper waits for it
    instead of calling the slot lost at its deadline (ledger.OFFLINE_PATIENCE)."""
    if slot_at is None:
        return
    try:
        heartbeat.record_mark("db-away", worker)
        heartbeat.record_mark("offline-slot", ledger.offline_slot(probe_id, slot_at))
    except redis.RedisError as exc:  # both away: the disk spool keeps the run
        log.warning("Could not mark slot %s of probe %s taken offline (%s)", slot_at, probe_id, exc)


def _wait(probe: Probe, slot_at: datetime | None, worker: str) -> caps.Wait:
    """A slot waits for a full cap in turn until the last moment it may start."""
    if slot_at is None:
        until = datetime.now(UTC) + timedelta(seconds=UNSCHEDULED_WAIT_S)
    else:
        until = lateness.latest_start(probe, slot_at, floor_s=2 * settings.DISPATCH_INTERVAL_S)
    return caps.Wait(until.timestamp(), probe.workload.slug, partial(heartbeat.is_stopping, worker))


def _skip(probe: Probe, slot_at: datetime | None, code: SlotReason, reason: str) -> None:
    if slot_at is not None:
        _settle_quietly(ledger.mark_skipped, probe.pk, slot_at, code, reason)
    log.info("Probe %s slot %s %s", probe.pk, slot_at and slot_at.isoformat(), reason)


@shared_task(acks_late=True, ignore_result=True, time_limit=3600, soft_time_limit=3500)
def prune_raw_runs() -> int:
    """Daily: delete raw runs older than RAW_RUN_RETENTION_DAYS (rollups stay)."""
    cutoff = retention.cutoff()
    deleted = retention.prune(cutoff)
    # The slot ledger is kept as long as the raw runs it accounts for.
    slots = ledger.prune(cutoff)
    log.info("Pruned %d raw runs and %d dispatched-slot rows", deleted, slots)
    return deleted


@shared_task(bind=True, acks_late=True, ignore_result=True, time_limit=300, soft_time_limit=240)
def calibrate_worker(self, duration_s: float = 6.0) -> dict:
    """Measure this worker's own ceiling against a local simulator and store it."""
    result = calibrate(duration_s=duration_s)
    row = WorkerCalibration.objects.create(
        worker=_worker_name(self),
        region=settings.PROBE_REGION,
        measured_at=datetime.now(UTC),
        max_events_per_s=result.flood_events_per_s,
        # At one token per event, the flood rate is also the fastest tok/s we can parse.
        max_output_tps=result.flood_events_per_s,
        details=result.to_dict(),
    )
    return {"worker": row.worker, "max_events_per_s": row.max_events_per_s}


@shared_task(bind=True, acks_late=True, ignore_result=True, time_limit=60, soft_time_limit=50)
def calibrate_workers(self) -> list[str]:
    """Ask every live worker, on its own direct queue, to calibrate itself."""
    names = [name for reply in self.app.control.ping(timeout=2.0) for name in reply]
    for name in names:
        calibrate_worker.apply_async(queue=worker_direct(name))
    return names
