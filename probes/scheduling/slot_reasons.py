"""Lost and skipped slots counted by reason, and their counts kept past pruning.

A slot's reason is a code of the one vocabulary (probes/scheduling/outcomes.py), which
/metrics uses as its `reason` label. Rows closed before codes were kept are classified
by their text (LEGACY_KINDS). When retention prunes ledger rows, the lost and skipped ones
are first added to SlotTally in the same transaction, so
`inferwatch_{lost,skipped}_slots_total` never go down.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.db import transaction
from django.db.models import F

from probes.models import DispatchedSlot, SlotTally
from probes.scheduling.outcomes import SlotReason, label_of

COUNTED_STATES = ("lost", "skipped")
# Rows closed before reason codes were kept: (words the text contains, code), the first
# match wins, in the same vocabulary.
LEGACY_KINDS = (
    ("(worker killed)", SlotReason.WORKER_KILLED),
    ("stopped sending heartbeats", SlotReason.WORKER_KILLED),
    ("(database away)", SlotReason.DATABASE_AWAY),
    ("(ran past its budget)", SlotReason.OVER_BUDGET),
    ("(no worker running)", SlotReason.NO_WORKER),
    ("(queue backed up)", SlotReason.QUEUE_BACKED_UP),
    ("re-sent, but", SlotReason.QUEUE_BACKED_UP),
    ("no worker of region", SlotReason.QUEUE_BACKED_UP),
    ("would have started", SlotReason.STARTED_LATE),
    ("maintenance window", SlotReason.MAINTENANCE),
    ("Skipped: due", SlotReason.MISSED),
    ("backing off", SlotReason.PROVIDER_BACKING_OFF),
    ("max concurrency", SlotReason.CAP_TOO_NARROW),
    ("slots held by", SlotReason.CAP_BUSY),
    ("stopped before", SlotReason.STOPPED),
)


def reason_kind(code: str, reason: str) -> str:
    """The /metrics label of a closed slot: its code, else its legacy text's."""
    if code:
        return code
    for words, kind in LEGACY_KINDS:
        if words in reason:
            return kind.value
    return "unrecorded"


def legacy_label(reason: str) -> str:
    kind = reason_kind("", reason)
    return label_of(kind) or "reason not recorded"


def counts() -> Counter:
    """(state, region, reason kind) → lost or skipped slots ever: kept rows plus tallies."""
    total: Counter = Counter()
    rows = (
        DispatchedSlot.objects.filter(state__in=COUNTED_STATES)
        .values_list("state", "region", "reason_code", "reason")
        .order_by()
    )
    for state, region, code, reason in rows:
        total[(state, region, reason_kind(code, reason))] += 1
    for tally in SlotTally.objects.all():
        total[(tally.state, tally.region, tally.reason)] += tally.count
    return total


def carry_over(before: datetime) -> int:
    """Tally, then delete, the lost and skipped ledger rows of slots before `before` (one
    transaction: counted exactly once). Returns the rows deleted."""
    with transaction.atomic():
        rows = list(
            DispatchedSlot.objects.select_for_update()
            .filter(state__in=COUNTED_STATES, slot_at__lt=before)
            .values_list("pk", "state", "region", "reason_code", "reason")
        )
        if not rows:
            return 0
        added = Counter(
            (state, region, reason_kind(code, why)) for _, state, region, code, why in rows
        )
        for (state, region, kind), n in added.items():
            tally, _ = SlotTally.objects.get_or_create(state=state, region=region, reason=kind)
            SlotTally.objects.filter(pk=tally.pk).update(count=F("count") + n)
        DispatchedSlot.objects.filter(pk__in=[pk for pk, *_ in rows]).delete()
        return len(rows)
