"""The ledger of dispatched slots: no slot the dispatcher queued can vanish.

The dispatcher writes a DispatchedSlot row in the same transaction as its claim; the
worker marks it started (with a fresh deadline) each time it takes the task, and done
once the run is recorded. A worker killed whole (main process and children) leaves its
message unacked in Redis for an hour, past the task's `expires`, so without the ledger
that slot would silently disappear. The sweeper finds open slots past their deadline
(or started on a worker whose heartbeat stopped, so a dead worker is noticed in about a
minute rather than after the provider's total timeout):

- a run is recorded after all (e.g. it came out of the spool): the slot is done;
- else, sent once only and still able to start before the probe's next slot: re-send it;
- else: the slot is lost, with the reason.

Lost slots are our failure (a dead worker, a backed-up queue), not the provider's: they
never become ProbeRuns nor count against availability; /status and the admin show them.

Every state change is a conditional UPDATE (healthchecks-style, no locks), so two
sweepers, or a sweeper and a late worker, act once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When

from probes.models import OPEN_SLOT_STATES, DispatchedSlot, Probe, ProbeRun
from probes.platform.pruning import delete_before
from probes.scheduling import heartbeat, slot_reasons
from probes.scheduling.outcomes import SlotReason, label_of

log = logging.getLogger(__name__)

# Beyond the provider's own timeouts: recording retries a missing database for 30 s,
# a worker may wait for a free request slot under a cap, and clocks differ a little.
GRACE_S = 120.0
# A re-sent slot must be able to start this long before the probe's next slot.
RESEND_MARGIN_S = 5.0
# A slot is sent at most this many times (the dispatch and one re-send).
MAX_SENDS = 2
# A worker whose heartbeat (probes/scheduling/heartbeat.py, every 15 s) is older than this is
# taken for dead: its started slots are settled without waiting for their deadline.
WORKER_SILENT_AFTER_S = 4 * heartbeat.WORKER_INTERVAL_S


def run_budget(probe: Probe) -> timedelta:
    """How long a slot may take once started: every request at its total timeout."""
    total_s = probe.endpoint.provider.total_timeout_s * probe.workload.requests
    return timedelta(seconds=total_s + GRACE_S)


def queued_deadline(probe: Probe, start_at: datetime, next_at: datetime) -> datetime:
    """A queued slot must have started by its next slot: its task expires then."""
    return min(start_at + run_budget(probe), next_at)


def entry_for(probe: Probe, slot_at: datetime, next_at: datetime, start_at: datetime):
    """The ledger row for a slot being claimed (written with the claim: dispatch.claim)."""
    return DispatchedSlot(
        probe_id=probe.pk,
        slot_at=slot_at,
        region=probe.region,
        queued_at=datetime.now(UTC),
        deadline=queued_deadline(probe, start_at, next_at),
        next_at=next_at,
    )


def forget_dispatch(probe_id: int, slot_at: datetime) -> None:
    """The slot's task could not be sent and its claim was undone: no ledger row either."""
    DispatchedSlot.objects.filter(probe_id=probe_id, slot_at=slot_at, state="queued").delete()


def mark_started(probe: Probe, slot_at: datetime, worker: str) -> bool:
    """A worker takes the slot's task; False if the slot is already settled (skip it).

    Called on every delivery, retries included, so a live task keeps pushing its
    deadline out while a dead one stops. A slot with no ledger row (sent by hand, or
    before the ledger existed) runs as before.
    """
    now = datetime.now(UTC)
    started = DispatchedSlot.objects.filter(
        probe_id=probe.pk, slot_at=slot_at, state__in=OPEN_SLOT_STATES
    ).update(
        # A new start (a re-send on another worker) forgets an earlier worker's stop.
        state="started",
        worker=worker[:200],
        deadline=now + run_budget(probe),
        stop_requested_at=None,
    )
    if started:
        return True
    return not DispatchedSlot.objects.filter(probe_id=probe.pk, slot_at=slot_at).exists()


def _close(probe_id: int, slot_at: datetime, state: str, code, reason: str = "") -> int:
    # Without a new reason the old one stays: a done slot keeps why it was re-sent.
    change = {"state": state, "reason_code": code, "closed_at": datetime.now(UTC)} | (
        {"reason": reason[:1000]} if reason else {}
    )
    return DispatchedSlot.objects.filter(
        probe_id=probe_id, slot_at=slot_at, state__in=OPEN_SLOT_STATES
    ).update(**change)


def _done_code():
    """RAN, or RAN_AFTER_RESEND for a slot sent twice: decided by the row in the UPDATE."""
    return Case(
        When(attempts__gt=1, then=Value(SlotReason.RAN_AFTER_RESEND.value)),
        default=Value(SlotReason.RAN.value),
    )


def mark_done(probe_id: int, slot_at: datetime) -> int:
    return _close(probe_id, slot_at, "done", _done_code())


def mark_skipped(probe_id: int, slot_at: datetime, code: SlotReason, reason: str) -> int:
    """Not run on purpose (the provider asked us to wait, a cap was full, …): neither
    done nor lost. `code` is the vocabulary's (outcomes.py), `reason` the particulars."""
    assert code.state == "skipped", code
    return _close(probe_id, slot_at, "skipped", code.value, reason)


def mark_stop_requested(worker: str, now: datetime | None = None) -> int:
    """The worker `worker` begins a stop: its started slots remember it in the database,
    so they end stopped even if it is killed after its grace and Redis (where the
    heartbeat marks live) forgets the stop across the restart."""
    return DispatchedSlot.objects.filter(state="started", worker=worker).update(
        stop_requested_at=now or datetime.now(UTC)
    )


# -- the sweeper -----------------------------------------------------------------------------


@dataclass
class SweepReport:
    done: int = 0
    resent: int = 0
    skipped: int = 0
    lost: int = 0


@dataclass(frozen=True)
class Known:
    """What the sweeper knows of the workers (marks from probes/scheduling/heartbeat.py):
    a slot is lost for a cause it knows, or was stopped, never for a guess."""

    silent: Collection[str] = ()  # holding started slots, heartbeat stopped: dead
    stopped: dict[str, datetime] = field(default_factory=dict)  # clean stops began
    started: dict[str, datetime] = field(default_factory=dict)  # workers' last starts
    killed: dict[str, datetime] = field(default_factory=dict)  # restarted after dying
    db_away: dict[str, datetime] = field(default_factory=dict)  # database unreachable
    broker_away: dict[str, datetime] = field(default_factory=dict)  # reconnected to Redis
    # Slots a worker took with the database away (offline_slot names them): measured or
    # measuring, their runs on the way through the recorder's retries or the spool.
    offline: dict[str, datetime] = field(default_factory=dict)
    # Of those, the ones it skipped: (reason code, reason) (offline_outcomes.py).
    skipped_offline: dict[str, tuple[str, str]] = field(default_factory=dict)
    alive: int | None = None  # workers beating now (None: Redis could not say)


# The causes /status names, in the reason's "Lost (<cause>): …" (outcomes.py's labels).
WORKER_KILLED = SlotReason.WORKER_KILLED
QUEUE_BACKED_UP = SlotReason.QUEUE_BACKED_UP
NO_WORKER = SlotReason.NO_WORKER
DATABASE_AWAY = SlotReason.DATABASE_AWAY
OVER_BUDGET = SlotReason.OVER_BUDGET


CLEAN_STOPS = " (Ctrl-C, SIGTERM or a deploy)"
# How long the sweeper waits for the run of a slot taken while the database was away
# (the recorder retries for 30 s, then the spool is drained every minute) before it calls
# the slot lost, the database named as the cause.
OFFLINE_PATIENCE = timedelta(minutes=10)


def offline_slot(probe_id: int, slot_at: datetime) -> str:
    """The name of a slot taken offline, as its mark is kept (Known.offline)."""
    return f"{probe_id}@{int(slot_at.timestamp())}"


def _run_on_the_way(row: DispatchedSlot, known: Known, now: datetime) -> bool:
    taken = known.offline.get(offline_slot(row.probe_id, row.slot_at))
    return taken is not None and now - taken < OFFLINE_PATIENCE


# A worker started again this recently is still working through what queued up while it
# was down: slots it could not start in time were stopped by the restart, not lost.
RESTART_GRACE = timedelta(seconds=60)


def _since(marks: dict[str, datetime], row: DispatchedSlot, worker: str | None = None):
    """Workers (or `worker`) with a mark from after the slot was queued."""
    names = [worker] if worker else list(marks)
    return sorted(n for n in names if n in marks and marks[n] >= row.queued_at)


def _stopped_cleanly(row: DispatchedSlot, known: Known) -> str:
    """Why the slot is not lost but stopped (a clean stop interrupted it), or ""."""
    if row.state == "started":
        if row.stop_requested_at is not None:
            # Recorded in the database when the stop began: a kill after the grace, or a
            # Redis that lost the marks, does not make the stop a loss.
            return f"stopped before it could finish: {row.worker} was stopped{CLEAN_STOPS}"
        if _since(known.stopped, row, row.worker) and not _since(known.killed, row, row.worker):
            return f"stopped before it could finish: {row.worker} was stopped{CLEAN_STOPS}"
        return ""
    stopped = _since(known.stopped, row)
    if stopped:
        return f"stopped before it could start: {', '.join(stopped)} stopped{CLEAN_STOPS}"
    restarting = _restarting(row, known)
    if restarting:
        return f"stopped before it could start: {', '.join(restarting)} was down or starting again"
    return ""


def _restarting(row: DispatchedSlot, known: Known) -> list[str]:
    """Workers that were down or only starting when the slot was queued: stopped cleanly
    and not back yet, or started (again) too shortly before it to work through what had
    queued up meanwhile. `make run`'s beat queues slots before its worker is ready, and
    its embedded Redis forgets the queue across a restart: those slots were stopped by
    the restart, not lost. A worker known to have died is not a stop."""
    names = set()
    for name, stopped_at in known.stopped.items():
        started_at = known.started.get(name)
        if started_at is None or started_at < stopped_at:
            names.add(name)
    for name, started_at in known.started.items():
        if row.queued_at <= started_at + RESTART_GRACE:
            names.add(name)
    return sorted(n for n in names if not _since(known.killed, row, n))


def _cause(row: DispatchedSlot, known: Known) -> tuple[SlotReason, str]:
    """(the cause /status names, the detail) of a slot that ended with no run."""
    worker = row.worker or "a worker"
    if row.state == "started" and (
        row.worker in known.silent or _since(known.killed, row, row.worker)
    ):
        how = "stopped sending heartbeats" if row.worker in known.silent else "restarted"
        return WORKER_KILLED, f"started on {worker}, which {how} without a clean stop"
    if _since(known.db_away, row):
        return DATABASE_AWAY, "a worker could not reach the database while the slot was open"
    if row.state == "started":
        return OVER_BUDGET, f"started on {worker}, no result by its deadline"
    if known.alive == 0:
        return NO_WORKER, f"no worker was alive to start it (region {row.region})"
    if row.state == "retried":
        return QUEUE_BACKED_UP, f"re-sent, but no worker of region {row.region} started it in time"
    return QUEUE_BACKED_UP, f"no worker of region {row.region} started it in time"


def settle_soon(slots: Collection[tuple[int, datetime]], now: datetime) -> int:
    """Slots whose message a worker dropped unstarted (broker_outage.py): due now, so the
    next sweep re-sends or skips them instead of waiting for the probe's next slot."""
    moved = 0
    for probe_id, slot_at in slots:
        moved += DispatchedSlot.objects.filter(
            probe_id=probe_id, slot_at=slot_at, state__in=("queued", "retried"), deadline__gt=now
        ).update(deadline=now)
    return moved


def _broker_dropped(row: DispatchedSlot, known: Known) -> str:
    """Why a slot never started because Redis went away after it was queued, or "": its
    message was dropped with the connection (or the queue with Redis itself), like a slot
    that could not be dispatched while Redis was away."""
    if row.state not in ("queued", "retried"):
        return ""
    away = _since(known.broker_away, row)
    if not away:
        return ""
    return (
        f"Redis, the broker, went away after it was queued ({', '.join(away)} reconnected): "
        "its message was dropped, and it could not start again before the next slot"
    )


def abandon_started(worker: str, now: datetime | None = None) -> int:
    """A worker starts under `worker`'s name: the slots its previous run left started
    are overdue now (the next sweep settles them), not at a deadline an hour away."""
    now = now or datetime.now(UTC)
    return DispatchedSlot.objects.filter(state="started", worker=worker, deadline__gt=now).update(
        deadline=now
    )


def silent_workers(beats: dict[str, datetime], now: datetime) -> set[str]:
    """Workers holding started slots whose heartbeat stopped (or expired altogether)."""
    holding = DispatchedSlot.objects.filter(state="started").values_list("worker", flat=True)
    since = now - timedelta(seconds=WORKER_SILENT_AFTER_S)
    return {w for w in holding.distinct() if w not in beats or beats[w] < since}


def overdue(now: datetime, silent: Collection[str], limit: int):
    """Open slots past their deadline, and slots started on a worker gone silent."""
    recorded = ProbeRun.objects.filter(probe_id=OuterRef("probe_id"), slot_at=OuterRef("slot_at"))
    late = Q(deadline__lte=now)
    if silent:
        late |= Q(state="started", worker__in=list(silent))
    return (
        DispatchedSlot.objects.filter(late, state__in=OPEN_SLOT_STATES)
        .annotate(recorded=Exists(recorded))
        .select_related("probe__endpoint__provider", "probe__workload")
        .order_by("deadline")[:limit]
    )


def _as_seen(row: DispatchedSlot):
    """The row exactly as this sweeper read it: an update through this wins only if no
    one (another sweeper, a late worker) changed it since."""
    return DispatchedSlot.objects.filter(
        pk=row.pk, state=row.state, attempts=row.attempts, deadline=row.deadline
    )


def settle(
    row: DispatchedSlot,
    now: datetime,
    resend: Callable[[DispatchedSlot], None],
    known: Known | None = None,
) -> str:
    """Decide one overdue slot; 'done', 'resent', 'skipped', 'lost' or '' (someone else did)."""
    known = known or Known()
    if row.recorded:
        won = _as_seen(row).update(state="done", reason_code=_done_code(), closed_at=now)
        return "done" if won else ""
    kept = known.skipped_offline.get(offline_slot(row.probe_id, row.slot_at))
    if kept:  # skipped by its worker with the database away: closed as it decided
        code, reason = kept
        won = _as_seen(row).update(
            state="skipped", reason_code=code, reason=reason[:1000], closed_at=now
        )
        return "skipped" if won else ""
    if _run_on_the_way(row, known, now):
        return ""  # measured with the database away: its run is written later, then done
    stopped = _stopped_cleanly(row, known)
    cause, detail = _cause(row, known)
    # A re-sent copy that would start too late is skipped by the worker (tasks.run_probe,
    # probes/scheduling/lateness.py): a re-send never bunches with the next slot.
    can_start = now + timedelta(seconds=RESEND_MARGIN_S) < row.next_at
    if row.attempts < MAX_SENDS and can_start:
        deadline = queued_deadline(row.probe, now, row.next_at)
        with transaction.atomic():
            won = _as_seen(row).update(
                state="retried",
                attempts=F("attempts") + 1,
                queued_at=now,
                deadline=deadline,
                reason=f"Re-sent: {stopped or detail}."[:1000],
            )
            if won:
                # Inside the transaction: if the broker refuses, the row stays as it
                # was and the next sweep tries again.
                resend(row)
        return "resent" if won else ""
    # The broker's going away is a cause known for sure; "restarting" is a heuristic.
    dropped = _broker_dropped(row, known)
    if dropped:
        won = _as_seen(row).update(
            state="skipped",
            reason_code=SlotReason.BROKER_AWAY.value,
            reason=f"Skipped: {dropped}."[:1000],
            closed_at=now,
        )
        return "skipped" if won else ""
    if stopped:
        # A clean stop is not a failure: the slot is skipped, saying so.
        won = _as_seen(row).update(
            state="skipped",
            reason_code=SlotReason.STOPPED.value,
            reason=f"Skipped: {stopped}."[:1000],
            closed_at=now,
        )
        return "skipped" if won else ""
    if row.attempts >= MAX_SENDS:
        reason = f"Lost ({cause.label}): {detail}; already re-sent once."
    else:
        next_at = f"{row.next_at:%Y-%m-%d %H:%M:%S} UTC"
        reason = (
            f"Lost ({cause.label}): {detail}; too late to re-send before the next slot at "
            f"{next_at}."
        )
    won = _as_seen(row).update(
        state="lost", reason_code=cause.value, reason=reason[:1000], closed_at=now
    )
    if won:
        log.warning("Probe %s slot %s %s", row.probe_id, row.slot_at.isoformat(), reason)
    return "lost" if won else ""


def sweep(
    resend: Callable[[DispatchedSlot], None],
    now: datetime | None = None,
    silent: Collection[str] = (),
    limit: int = 1000,
    known: Known | None = None,
) -> SweepReport:
    """Settle every open slot past its deadline, or started on a `silent` (dead) worker."""
    now = now or datetime.now(UTC)
    known = known or Known(silent=silent)
    report = SweepReport()
    for row in overdue(now, known.silent, limit):
        outcome = settle(row, now, resend, known)
        if outcome:
            setattr(report, outcome, getattr(report, outcome) + 1)
    return report


# -- reading and retention -------------------------------------------------------------------


def lost_since(since: datetime):
    return DispatchedSlot.objects.filter(state="lost", closed_at__gte=since)


@dataclass(frozen=True)
class Skips:
    """Slots skipped lately, and why the latest was: what a page says beside no data.
    `reason` is the vocabulary's label (outcomes.py), `detail` the particulars."""

    count: int
    reason: str
    detail: str = ""
    code: str = ""

    def as_dict(self) -> dict:
        """The API's shape: the vocabulary's code and label (the particulars stay in the
        admin: they name workers and hosts)."""
        return {"count": self.count, "reason_code": self.code or None, "reason": self.reason}


def reason_label(code: str, detail: str) -> str:
    """A closed slot's reason as every page shows it: the vocabulary's label; for a row
    closed before codes were kept, its kind as /metrics counts it."""
    return label_of(code) or slot_reasons.legacy_label(detail)


def skips_by(key: str, ids: Collection[int], since: datetime, **scope) -> dict[int, Skips]:
    """Skipped slots since `since` per `key` ("probe_id", or "probe__endpoint_id"), among
    `ids`; `scope` narrows them (e.g. probe__workload__slug=…)."""
    if not ids:
        return {}
    rows = (
        DispatchedSlot.objects.filter(
            state="skipped", slot_at__gte=since, **{f"{key}__in": list(ids)}
        )
        .filter(**scope)
        .order_by("-slot_at")
        .values_list(key, "reason_code", "reason")
    )
    counts: dict[int, int] = {}
    latest: dict[int, tuple[str, str, str]] = {}
    for owner, code, detail in rows[:5000]:
        counts[owner] = counts.get(owner, 0) + 1
        latest.setdefault(owner, (reason_label(code, detail), detail, code))
    return {owner: Skips(n, *latest[owner]) for owner, n in counts.items()}


def prune(before: datetime) -> int:
    """Delete ledger rows of slots before `before` (the raw-run cutoff), in batches; lost
    and skipped ones are tallied first (slot_reasons: /metrics counters never go down)."""
    tallied = slot_reasons.carry_over(before)
    return tallied + delete_before("probes_dispatchedslot", "slot_at", before)
