"""The dispatcher: claim the probes that are due and queue one run per slot.

Claiming is healthchecks-style, without locks: read the due probes, then for each
`UPDATE … SET next_run_at = <next slot> WHERE id = … AND next_run_at = <what we read>`
and send the task only if exactly one row changed. Two dispatchers (two beats, or a
tick that overlaps the previous one) race on that UPDATE; Postgres lets one win per slot.

Each tick claims the slots falling before the next tick and queues them with a countdown
to their exact time, so starts are on time whatever the tick interval. A slot that could only
start late (downtime, a pause, an interval edit) is skipped, not run: see too_late().
Each task goes to
the queue of the probe's region (`probes.<region>`), with a random extra delay within
the probe's jitter and `expires` at the next slot: a backed-up queue
drops stale slots instead of running a burst of them.

The claim and the slot's ledger row (probes/scheduling/ledger.py) are one statement: a claimed
slot is always on the ledger, so the sweeper can re-send or report it if its worker dies.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Q

from probes.models import DispatchedSlot, Probe
from probes.scheduling import lateness, ledger
from probes.scheduling.outcomes import SlotReason

log = logging.getLogger(__name__)

ONE_SECOND = timedelta(seconds=1)


def queue_for(region: str) -> str:
    return f"probes.{region}"


@dataclass(frozen=True)
class Slot:
    probe_id: int
    region: str
    slot_at: datetime  # the scheduled time this run fills (the idempotency key)
    next_at: datetime  # the probe's next slot: the task expires then
    delay_s: float  # jitter: start this long after slot_at

    @property
    def queue(self) -> str:
        return queue_for(self.region)


def due_at(probe: Probe) -> datetime:
    """When the probe's next slot falls.

    Normally next_run_at; but if the interval was shortened in the admin since the last
    dispatch, the new interval counts from the last slot (takes effect at once).
    """
    if probe.last_dispatched_at is None:
        return probe.next_run_at
    return min(probe.next_run_at, probe.last_dispatched_at + probe.interval_s * ONE_SECOND)


def following_slot(slot_at: datetime, interval_s: int, now: datetime) -> datetime:
    """The first slot after `now` on the probe's cadence (missed slots are skipped)."""
    interval = interval_s * ONE_SECOND
    following = slot_at + interval
    if following <= now:
        following += ((now - following) // interval + 1) * interval
    return following


def due_probes(now: datetime):
    last_plus_interval = ExpressionWrapper(
        F("last_dispatched_at") + F("interval_s") * ONE_SECOND, output_field=DateTimeField()
    )
    return (
        Probe.objects.active()
        .alias(interval_due=last_plus_interval)
        .filter(Q(next_run_at__lte=now) | Q(interval_due__lte=now))
        .order_by("next_run_at", "pk")
        .select_related("endpoint__provider", "workload")
        # The ledger's deadline needs the provider's total timeout and the request count.
        .only(
            "id",
            "region",
            "interval_s",
            "jitter_s",
            "next_run_at",
            "last_dispatched_at",
            "endpoint__provider__total_timeout_s",
            "workload__requests",
        )
    )


def claim(
    probe: Probe, now: datetime, horizon: datetime | None = None, rng: random.Random | None = None
) -> Slot | None:
    """Move the probe to its next slot if nobody else did; the claimed slot, or None.

    Slots up to `horizon` (a tick ahead) are claimed now and start at their exact time
    (countdown), so the tick interval adds no delay.
    """
    horizon = horizon or now
    slot_at = due_at(probe)
    if slot_at > horizon:
        return None
    if lateness.too_late(probe, slot_at, now, floor_s=2 * settings.DISPATCH_INTERVAL_S):
        skip_missed(probe, slot_at, now)
        return None
    next_at = following_slot(slot_at, probe.interval_s, horizon)
    jitter = min(probe.jitter_s, max(0, probe.interval_s - 1))
    delay = max(0.0, (slot_at - now).total_seconds())
    delay += (rng or random).uniform(0, jitter) if jitter else 0.0
    entry = ledger.entry_for(probe, slot_at, next_at, now + timedelta(seconds=delay))
    if not _claim_and_record(probe, entry):
        return None
    return Slot(probe.pk, probe.region, slot_at, next_at, delay)


def skip_missed(probe: Probe, slot_at: datetime, now: datetime) -> bool:
    """Record a missed slot as skipped and move the probe to its first slot after now.

    The probe's last slot becomes the cadence slot just before its new next one (not
    dispatched, a bookmark): due_at() then waits for the next slot instead of counting
    a shortened interval from a slot long past.
    """
    next_at = following_slot(slot_at, probe.interval_s, now)
    late_s = (now - slot_at).total_seconds()
    reason = (
        f"Skipped: due {late_s:,.0f} s ago (downtime, a pause or an interval edit); "
        f"not run late to catch up. Next slot {next_at:%Y-%m-%d %H:%M:%S} UTC."
    )
    entry = ledger.entry_for(probe, slot_at, next_at, now)
    return _claim_and_record(
        probe,
        entry,
        dispatched_at=next_at - probe.interval_s * ONE_SECOND,
        state="skipped",
        reason=reason,
        closed_at=now,
        code=SlotReason.MISSED.value,
    )


# The conditional UPDATE and the ledger INSERT as one statement: atomic without an
# explicit transaction, and one round trip per slot like the bare claim (an ORM
# transaction costs four; 1,000 slots due at once would queue seconds later).
# A slot dispatched again (the admin moved the probe back to an old slot time)
# reopens its ledger row instead of failing the claim.
_CLAIM_AND_RECORD = """
WITH claimed AS (
    UPDATE probes_probe SET next_run_at = %(next_at)s, last_dispatched_at = %(dispatched_at)s
     WHERE id = %(probe)s AND next_run_at = %(seen_next)s
       AND last_dispatched_at IS NOT DISTINCT FROM %(seen_last)s
    RETURNING id)
INSERT INTO probes_dispatchedslot
    (probe_id, slot_at, region, queued_at, deadline, next_at, state, worker, attempts,
     reason, reason_code, closed_at)
SELECT id, %(slot_at)s, %(region)s, %(queued_at)s, %(deadline)s, %(next_at)s, %(state)s, '',
       1, %(reason)s, %(code)s, %(closed_at)s
  FROM claimed
ON CONFLICT (probe_id, slot_at) DO UPDATE SET
    region = EXCLUDED.region, queued_at = EXCLUDED.queued_at, deadline = EXCLUDED.deadline,
    next_at = EXCLUDED.next_at, state = EXCLUDED.state, worker = '', attempts = 1,
    reason = EXCLUDED.reason, reason_code = EXCLUDED.reason_code,
    closed_at = EXCLUDED.closed_at, stop_requested_at = NULL
RETURNING probe_id
"""


def _claim_and_record(
    probe: Probe,
    entry: DispatchedSlot,
    dispatched_at: datetime | None = None,
    state: str = "queued",
    reason: str = "",
    closed_at: datetime | None = None,
    code: str = "",
) -> bool:
    """Move the probe to its next slot and put the slot on the ledger, if nobody else
    moved it first; True if this call won the slot."""
    with connection.cursor() as cursor:
        cursor.execute(
            _CLAIM_AND_RECORD,
            {
                "probe": probe.pk,
                "seen_next": probe.next_run_at,
                "seen_last": probe.last_dispatched_at,
                "slot_at": entry.slot_at,
                "dispatched_at": dispatched_at or entry.slot_at,
                "next_at": entry.next_at,
                "region": entry.region,
                "queued_at": entry.queued_at,
                "deadline": entry.deadline,
                "state": state,
                "reason": reason,
                "closed_at": closed_at,
                "code": code,
            },
        )
        return cursor.fetchone() is not None


def unclaim(probe: Probe, slot: Slot) -> None:
    """Put a claimed slot back (its task could not be sent): the next tick retries it."""
    with transaction.atomic():
        Probe.objects.filter(pk=probe.pk, next_run_at=slot.next_at).update(
            next_run_at=probe.next_run_at, last_dispatched_at=probe.last_dispatched_at
        )
        ledger.forget_dispatch(probe.pk, slot.slot_at)


def dispatch_due(
    send: Callable[[Slot], None],
    now: datetime | None = None,
    lookahead_s: float | None = None,
    limit: int = 5000,
) -> list[Slot]:
    """Claim every probe due before the next tick and `send` its slot; the slots sent."""
    now = now or datetime.now(UTC)
    if lookahead_s is None:
        lookahead_s = settings.DISPATCH_INTERVAL_S
    horizon = now + timedelta(seconds=lookahead_s)
    sent = []
    for probe in due_probes(horizon)[:limit]:
        slot = claim(probe, now, horizon)
        if slot is None:
            continue
        try:
            send(slot)
        except Exception:
            unclaim(probe, slot)
            log.exception("Could not queue probe %s; it will be retried next tick", probe.pk)
            raise
        sent.append(slot)
    return sent
