"""Running rules: measure each series' windows, decide, write the state changes.

Measuring: `samples.py`. Deciding: `decide.py` (plain Python). Writing: without locks,
like healthchecks' flips — the partial unique constraint admits one open event per
series, and every transition is a conditional UPDATE whose row count says who won, so
two evaluators running at once never notify twice.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Q

from dashboard.alerts import decide, samples
from dashboard.alerts.decide import NO_DATA, Action, State, Stats
from dashboard.alerts.delivery import enqueue_delivery, queue_notices
from dashboard.alerts.models import SAME_HOURS, AlertEvent, AlertRule, Notification, silence_for
from dashboard.alerts.samples import Series

log = logging.getLogger(__name__)

_STATES = {AlertEvent.PENDING: State.PENDING, AlertEvent.FIRING: State.FIRING}


@dataclass
class Outcome:
    pending: list[int] = field(default_factory=list)
    fired: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)
    reminded: list[int] = field(default_factory=list)
    cancelled: int = 0
    refreshed: int = 0
    unknown: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "pending": len(self.pending),
            "fired": len(self.fired),
            "resolved": len(self.resolved),
            "reminded": len(self.reminded),
            "cancelled": self.cancelled,
            "refreshed": self.refreshed,
            "unknown": self.unknown,
            "errors": self.errors,
        }


def measure(rule: AlertRule, now: datetime) -> tuple[dict[Series, Stats], dict[Series, Stats]]:
    """The recent window's and the baseline's samples of every series the rule covers."""
    scope = rule.runs_filter()
    recent_start = now - rule.recent_window
    if rule.metric == "minutes_since_ok":
        return samples.staleness(scope, now, rule.baseline_window), {}
    recent = samples.raw_stats(scope, rule.metric, [(recent_start, now)])
    if rule.condition != decide.REGRESSION:
        return recent, {}
    if rule.baseline_mode == SAME_HOURS:
        width = max(rule.recent_window, timedelta(hours=1))
        ranges = samples.same_hours_ranges(now, width)
        return recent, samples.raw_stats(scope, rule.metric, ranges)
    # The baseline ends where the recent window starts, so a regression cannot drag its
    # own baseline along with it.
    start = recent_start - rule.baseline_window
    return recent, samples.baseline_stats(scope, rule.metric, start, recent_start)


def evaluate_rule(rule: AlertRule, now: datetime, outcome: Outcome | None = None) -> Outcome:
    outcome = outcome or Outcome()
    condition, timing = rule.as_condition(), rule.as_timing()
    recent, baseline = measure(rule, now)
    regression = rule.condition == decide.REGRESSION
    open_events = {(e.endpoint_id, e.workload_id, e.region): e for e in rule.events.open()}
    seen = []

    for series in sorted(recent.keys() | open_events.keys()):
        event = open_events.get(series)
        state = _STATES[event.state] if event else State.OK
        verdict = decide.judge(
            condition,
            recent.get(series, NO_DATA),
            baseline.get(series, NO_DATA) if regression else None,
            firing=state is State.FIRING,
        )
        action = decide.step(
            state,
            verdict,
            now,
            timing,
            since=event.started_at if event else None,
            last_notified=(event.notified_at or event.fired_at) if event else None,
        )
        if action is Action.FIRE and event is None:
            event = open_event(rule, series, verdict, now, AlertEvent.FIRING)
            if event and fire(event, rule, now):
                outcome.fired.append(event.pk)
        elif action is Action.FIRE:
            if fire(event, rule, now, verdict):
                outcome.fired.append(event.pk)
        elif action is Action.PEND:
            event = open_event(rule, series, verdict, now, AlertEvent.PENDING)
            if event:
                outcome.pending.append(event.pk)
        elif action is Action.RESOLVE:
            if resolve(
                event, now, verdict.recent.value, "recovered", notify=rule.notify_on_resolve
            ):
                outcome.resolved.append(event.pk)
        elif action is Action.CANCEL:
            # A pending breach that cleared was never an alert: nothing to keep.
            outcome.cancelled += AlertEvent.objects.filter(
                pk=event.pk, state=AlertEvent.PENDING
            ).delete()[0]
        elif action is Action.REMIND:
            if remind(event, rule, now):
                outcome.reminded.append(event.pk)
        elif action is Action.REFRESH:
            refresh(event, rule, verdict, now)
            outcome.refreshed += 1
        elif verdict.health is decide.Health.UNKNOWN:
            outcome.unknown += 1
        seen.append([*series, _series_state(action, state, verdict), verdict.recent.value])
    # For /alerts/: every rule's series and their states, before anything fires.
    AlertRule.objects.filter(pk=rule.pk).update(last_evaluated_at=now, series_states=seen)
    return outcome


_AFTER = {
    Action.PEND: "pending",
    Action.FIRE: "firing",
    Action.REMIND: "firing",
    Action.RESOLVE: "ok",
    Action.CANCEL: "ok",
}


def _series_state(action: Action, state: State, verdict: decide.Verdict) -> str:
    """The series' state after this evaluation, as /alerts/ lists it."""
    if action in _AFTER:
        return _AFTER[action]
    if state is not State.OK:
        return state.value
    return "not enough data" if verdict.health is decide.Health.UNKNOWN else "ok"


def open_event(
    rule: AlertRule, series: Series, verdict: decide.Verdict, now: datetime, state: str
) -> AlertEvent | None:
    """A new pending or firing event; None if another evaluator got there first."""
    endpoint_id, workload_id, region = series
    baseline = verdict.baseline
    try:
        with transaction.atomic():
            return AlertEvent.objects.create(
                rule=rule,
                rule_name=rule.name,
                condition_label=rule.condition_label[:300],
                metric=rule.metric,
                endpoint_id=endpoint_id,
                workload_id=workload_id,
                region=region,
                state=state,
                started_at=now,
                window_start=now - rule.recent_window,
                **_values(verdict),
                baseline_samples=baseline.samples if baseline else None,
                last_checked_at=now,
            )
    except IntegrityError:
        log.info("rule %s series %s: already open (a concurrent evaluation won)", rule.pk, series)
        return None


def _values(verdict: decide.Verdict) -> dict:
    """What an event records of the verdict that opened or fired it: the level the series
    is at (the runs since the change for a CUSUM, the recent window otherwise), so the
    notice, the page and /alerts/ state the slowdown itself."""
    current = verdict.current
    return {
        "recent_value": current.value,
        "recent_samples": current.samples,
        "baseline_value": verdict.baseline.value if verdict.baseline else None,
        "limit_value": verdict.limit,
        "last_value": current.value,
        "p_value": verdict.p_value,
        "effect": verdict.effect,
        "changed_at": current.first_at if verdict.level is not None else None,
    }


def fire(
    event: AlertEvent, rule: AlertRule, now: datetime, verdict: decide.Verdict | None = None
) -> bool:
    """Pending (or just opened) → firing, and queue its notices unless silenced."""
    with transaction.atomic():
        update = {"state": AlertEvent.FIRING, "fired_at": now, "last_checked_at": now}
        if verdict is not None:  # ripened from pending: record what it fired with
            update |= _values(verdict) | {"window_start": now - rule.recent_window}
            if verdict.baseline:
                update["baseline_samples"] = verdict.baseline.samples
        claimed = (
            AlertEvent.objects.filter(pk=event.pk, resolved_at=None)
            .exclude(state=AlertEvent.FIRING, fired_at__isnull=False)
            .update(**update)
        )
        if claimed != 1:
            return False
        event.refresh_from_db()
        announce(event, Notification.FIRING, rule, now)
    log.warning("alert firing: %s on endpoint %s", rule.name, event.endpoint_id)
    return True


def announce(event: AlertEvent, transition: str, rule: AlertRule, now: datetime) -> bool:
    """Queue notices to the rule's channels, unless a silence covers the event."""
    silence = silence_for(event, now)
    if silence is not None:
        AlertEvent.objects.filter(pk=event.pk).update(silenced=True)
        log.info("alert %s %s: silenced (%s)", event.pk, transition, silence.reason)
        return False
    queue_notices(event, transition, rule.channels.filter(enabled=True), now)
    if transition != Notification.RESOLVED:
        AlertEvent.objects.filter(pk=event.pk).update(notified_at=now, silenced=False)
    return True


def refresh(event: AlertEvent, rule: AlertRule, verdict: decide.Verdict, now: datetime) -> None:
    AlertEvent.objects.filter(pk=event.pk, resolved_at=None).update(
        last_value=verdict.current.value, last_checked_at=now
    )
    if event.state == AlertEvent.FIRING and event.notified_at is None:
        # It fired during a silence that has since ended: tell people now (the
        # once-per-transition constraint keeps this to one notice).
        with contextlib.suppress(IntegrityError), transaction.atomic():
            announce(event, Notification.FIRING, rule, now)


def remind(event: AlertEvent, rule: AlertRule, now: datetime) -> bool:
    last = event.notified_at
    with transaction.atomic():
        if AlertEvent.objects.filter(pk=event.pk, notified_at=last).update(notified_at=now) != 1:
            return False
        return announce(event, Notification.REMINDER, rule, now)


def resolve(
    event: AlertEvent, now: datetime, value: float | None, reason: str, *, notify: bool
) -> bool:
    """Close an open event; True only for the one caller whose UPDATE changed the row.
    Nobody hears of the end of an alert they never heard of (fired while silenced)."""
    with transaction.atomic():
        claimed = AlertEvent.objects.filter(pk=event.pk, resolved_at=None).update(
            resolved_at=now, resolved_value=value, resolution=reason, state=AlertEvent.RESOLVED
        )
        if claimed != 1:
            return False
        event.refresh_from_db()
        if notify and event.rule_id and event.notified_at is not None:
            announce(event, Notification.RESOLVED, event.rule, now)
    log.info("alert resolved: %s on endpoint %s (%s)", event.rule_name, event.endpoint_id, reason)
    return True


def close_orphaned(now: datetime) -> int:
    """Events of disabled or deleted rules would otherwise stay open forever."""
    closed = 0
    stale = AlertEvent.objects.open().filter(Q(rule__isnull=True) | Q(rule__enabled=False))
    for event in stale.select_related("rule"):
        reason = "rule deleted" if event.rule_id is None else "rule disabled"
        closed += resolve(event, now, None, reason, notify=False)
    return closed


def requeue_stalled(now: datetime, older_than_s: int = 900, limit: int = 100) -> int:
    """Queue again notices never attempted (their enqueue failed, or the message was lost
    with a broker restart). Retried notices have attempts > 0 and are left to Celery.

    Each is claimed by moving its `queued_at` forward, so a notice is requeued at most
    once per `older_than_s` however many evaluators run."""
    cutoff = now - timedelta(seconds=older_than_s)
    stalled = Notification.objects.filter(
        status=Notification.QUEUED, attempts=0, event__isnull=False, queued_at__lt=cutoff
    ).values_list("pk", "queued_at")[:limit]
    requeued = 0
    for pk, queued_at in list(stalled):
        if Notification.objects.filter(pk=pk, queued_at=queued_at).update(queued_at=now) == 1:
            enqueue_delivery(pk, countdown=0)
            requeued += 1
    return requeued


def evaluate_all(now: datetime) -> dict:
    """Evaluate every enabled rule; one rule's failure does not stop the others."""
    outcome = Outcome()
    rules = AlertRule.objects.enabled().select_related("endpoint", "canonical_model", "workload")
    for rule in rules:
        try:
            evaluate_rule(rule, now, outcome)
        except Exception as exc:  # a broken rule must not silence every other alert
            log.exception("evaluating alert rule %s failed", rule.pk)
            outcome.errors.append(f"rule {rule.pk}: {type(exc).__name__}")
    summary = outcome.as_dict()
    summary["closed_orphans"] = close_orphaned(now)
    summary["requeued"] = requeue_stalled(now)
    return summary
