"""The one vocabulary of slot outcomes: every slot the dispatcher claims ends done,
skipped or lost, for one of these reasons. The code is the ledger's `reason_code` and
the `reason` label on /metrics; the label is the words the admin, the endpoint page, the
leaderboard, /status and the API show, verbatim. The ledger's free-text `reason` keeps
the particulars (which cap, which worker, until when) as a detail beside the label.

Plain Python (no Django import): the slot model takes its choices from here.
"""

from __future__ import annotations

from enum import StrEnum


class SlotReason(StrEnum):
    # done
    RAN = "ran"
    RAN_AFTER_RESEND = "ran_after_resend"
    # skipped: not run on purpose
    CAP_BUSY = "cap_busy"
    STARTED_LATE = "started_late"
    MISSED = "missed"
    MAINTENANCE = "maintenance"
    PROVIDER_BACKING_OFF = "provider_backing_off"
    CAP_TOO_NARROW = "cap_too_narrow"
    STOPPED = "stopped"
    BROKER_AWAY = "broker_away"
    # lost: ended with no run, our failure
    WORKER_KILLED = "worker_killed"
    DATABASE_AWAY = "database_away"
    OVER_BUDGET = "over_budget"
    NO_WORKER = "no_worker"
    QUEUE_BACKED_UP = "queue_backed_up"

    @property
    def label(self) -> str:
        return LABELS[self]

    @property
    def state(self) -> str:
        return STATES[self]


LABELS = {
    SlotReason.RAN: "ran",
    SlotReason.RAN_AFTER_RESEND: "ran after a re-send",
    SlotReason.CAP_BUSY: "cap busy",
    SlotReason.STARTED_LATE: "would have started late",
    SlotReason.MISSED: "missed while nothing dispatched",
    SlotReason.MAINTENANCE: "maintenance window",
    SlotReason.PROVIDER_BACKING_OFF: "provider backing off",
    SlotReason.CAP_TOO_NARROW: "cap too narrow",
    SlotReason.STOPPED: "worker stopped",
    SlotReason.BROKER_AWAY: "broker away",
    SlotReason.WORKER_KILLED: "worker killed",
    SlotReason.DATABASE_AWAY: "database away",
    SlotReason.OVER_BUDGET: "ran past its budget",
    SlotReason.NO_WORKER: "no worker running",
    SlotReason.QUEUE_BACKED_UP: "queue backed up",
}
_DONE = {SlotReason.RAN, SlotReason.RAN_AFTER_RESEND}
_LOST = {
    SlotReason.WORKER_KILLED,
    SlotReason.DATABASE_AWAY,
    SlotReason.OVER_BUDGET,
    SlotReason.NO_WORKER,
    SlotReason.QUEUE_BACKED_UP,
}
STATES = {
    reason: "done" if reason in _DONE else "lost" if reason in _LOST else "skipped"
    for reason in SlotReason
}
CHOICES = [(reason.value, LABELS[reason]) for reason in SlotReason]


def label_of(code: str) -> str:
    """The label of a stored code; "" for a row closed before codes were kept."""
    try:
        return SlotReason(code).label
    except ValueError:
        return ""
