"""Why slots ended lost or skipped, as a bounded label, and their counts kept past pruning.

Ledger reasons are free text (they name workers and times); /metrics labels them by kind.
When retention prunes ledger rows, the lost and skipped ones are first added to SlotTally
in the same transaction, so `inferwatch_{lost,skipped}_slots_total` never go down.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from django.db import transaction
from django.db.models import F

from probes.models import DispatchedSlot, SlotTally

COUNTED_STATES = ("lost", "skipped")
# (state, words the reason contains, label): the first match wins.
KINDS = (
    ("lost", "stopped sending heartbeats", "worker_silent"),
    ("lost", "left no result", "no_result"),
    ("lost", "re-sent, but", "resend_not_started"),
    ("lost", "no worker of region", "not_started"),
    ("skipped", "would have started", "started_late"),
    ("skipped", "maintenance window", "maintenance"),
    ("skipped", "Skipped: due", "missed"),
    ("skipped", "backing off", "provider_backing_off"),
    ("skipped", "max concurrency", "cap_too_narrow"),
)


def reason_kind(state: str, reason: str) -> str:
    for want_state, words, kind in KINDS:
        if state == want_state and words in reason:
            return kind
    return "other"


def counts() -> Counter:
    """(state, region, reason kind) → lost or skipped slots ever: kept rows plus tallies."""
    total: Counter = Counter()
    rows = (
        DispatchedSlot.objects.filter(state__in=COUNTED_STATES)
        .values_list("state", "region", "reason")
        .order_by()
    )
    for state, region, reason in rows:
        total[(state, region, reason_kind(state, reason))] += 1
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
            .values_list("pk", "state", "region", "reason")
        )
        if not rows:
            return 0
        added = Counter((state, region, reason_kind(state, why)) for _, state, region, why in rows)
        for (state, region, kind), n in added.items():
            tally, _ = SlotTally.objects.get_or_create(state=state, region=region, reason=kind)
            SlotTally.objects.filter(pk=tally.pk).update(count=F("count") + n)
        DispatchedSlot.objects.filter(pk__in=[pk for pk, *_ in rows]).delete()
        return len(rows)
