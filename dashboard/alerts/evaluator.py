"""Evaluating rules against raw runs and writing the resulting state changes.

Measuring: one grouped query per rule and window over ProbeRun (the run_series_idx
index on endpoint, workload, region, started_at) for the short windows; long baselines
read the whole hours they span from hourly rollups (mergeable histograms), falling back to
raw runs where no rollups have been written. Deciding: `evaluate.py`. Writing:
without locks, like healthchecks' flips — the partial unique constraint admits one open
event per series, and resolving is a conditional UPDATE whose row count says who won, so
two evaluators running at once never notify twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, models, transaction
from django.db.models import Count, Q

from dashboard import histogram
from dashboard.alerts import evaluate
from dashboard.alerts.evaluate import Action, Stats
from dashboard.alerts.models import AlertEvent, AlertRule, Notification
from dashboard.models import RunRollup
from probes.models import ProbeRun

log = logging.getLogger(__name__)

Series = tuple[int, int, str]  # endpoint id, workload id, region
NO_DATA = Stats(samples=0, value=None)
# Baselines at least this long come from hourly rollups rather than every raw run.
ROLLUP_BASELINE_FROM = timedelta(hours=6)
HOUR = timedelta(hours=1)


class Median(models.Aggregate):
    """Postgres' exact median (the windows are short, so raw runs are few)."""

    function = "PERCENTILE_CONT"
    name = "Median"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = models.FloatField()


def usable_runs(metric: str) -> Q:
    """Runs that count for a metric: failed runs never enter latency or speed statistics,
    and short outputs are left out of speed (metrics.md)."""
    q = Q(status="ok", **{f"{metric}__isnull": False}) & ~Q(role="step")
    if metric == "output_tps":
        q &= Q(short_output=False, stopped_short=False)
    return q


def window_stats(rule: AlertRule, start: datetime, end: datetime) -> dict[Series, Stats]:
    runs = (
        ProbeRun.objects.filter(rule.runs_filter(), started_at__gte=start, started_at__lt=end)
        .order_by()
        .values_list("endpoint_id", "workload_id", "region")
    )
    if rule.metric == "success_rate":
        rows = runs.annotate(n=Count("id"), ok=Count("id", filter=Q(status="ok")))
        return {(e, w, r): Stats(n, ok / n) for e, w, r, n, ok in rows if n}
    usable = usable_runs(rule.metric)
    rows = runs.annotate(n=Count("id", filter=usable), value=Median(rule.metric, filter=usable))
    return {(e, w, r): Stats(n, value) for e, w, r, n, value in rows}


def _floor_hour(when: datetime) -> datetime:
    return when.replace(minute=0, second=0, microsecond=0)


def rollup_window_stats(
    rule: AlertRule, start: datetime, end: datetime
) -> dict[Series, Stats] | None:
    """The whole hours of [start, end) from hourly rollups, or None when there are none
    (rollups not maintained yet): the caller then reads raw runs. Dropping the partial
    hours at both ends changes a 6 h+ baseline by at most two hours of its span."""
    first = _floor_hour(start) + (HOUR if _floor_hour(start) < start else timedelta(0))
    fields = ["endpoint_id", "workload_id", "region", "runs", "ok_runs"]
    if rule.metric != "success_rate":
        fields.append(f"hist_{rule.metric}")
    rows = (
        RunRollup.objects.filter(
            rule.runs_filter(),
            granularity=RunRollup.HOUR,
            bucket_start__gte=first,
            bucket_start__lt=_floor_hour(end),
        )
        .order_by()
        .values_list(*fields)
    )
    totals: dict[Series, list] = {}
    for endpoint_id, workload_id, region, runs, ok_runs, *hist in rows:
        total = totals.setdefault((endpoint_id, workload_id, region), [0, 0, []])
        total[0] += runs
        total[1] += ok_runs
        total[2].append(hist[0] if hist else None)
    if not totals:
        return None
    if rule.metric == "success_rate":
        return {series: Stats(n, ok / n) for series, (n, ok, _) in totals.items() if n}
    stats = {}
    for series, (_, _, hists) in totals.items():
        merged = histogram.merge(hists)
        stats[series] = Stats(histogram.count(merged), histogram.percentile(merged, 50))
    return stats


def baseline_stats(rule: AlertRule, start: datetime, end: datetime) -> dict[Series, Stats]:
    if end - start >= ROLLUP_BASELINE_FROM:
        from_rollups = rollup_window_stats(rule, start, end)
        if from_rollups is not None:
            return from_rollups
    return window_stats(rule, start, end)


@dataclass
class Outcome:
    fired: list[int] = field(default_factory=list)
    resolved: list[int] = field(default_factory=list)
    refreshed: int = 0
    unknown: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "fired": len(self.fired),
            "resolved": len(self.resolved),
            "refreshed": self.refreshed,
            "unknown": self.unknown,
            "errors": self.errors,
        }


def evaluate_rule(rule: AlertRule, now: datetime, outcome: Outcome | None = None) -> Outcome:
    outcome = outcome or Outcome()
    condition = rule.as_condition()
    recent_start = now - rule.recent_window
    recent = window_stats(rule, recent_start, now)
    baseline: dict[Series, Stats] = {}
    if rule.condition == evaluate.REGRESSION:
        # The baseline ends where the recent window starts, so a regression cannot
        # drag its own baseline along with it.
        baseline = baseline_stats(rule, recent_start - rule.baseline_window, recent_start)
    open_events = {(e.endpoint_id, e.workload_id, e.region): e for e in rule.events.open()}

    for series in sorted(recent.keys() | open_events.keys()):
        verdict = evaluate.judge(
            condition,
            recent.get(series, NO_DATA),
            baseline.get(series, NO_DATA) if rule.condition == evaluate.REGRESSION else None,
            firing=series in open_events,
        )
        action = evaluate.decide(series in open_events, verdict)
        if action is Action.FIRE:
            event = fire(rule, series, verdict, now)
            if event:
                outcome.fired.append(event.pk)
        elif action is Action.RESOLVE:
            event = open_events[series]
            if resolve(
                event, now, verdict.recent.value, "recovered", notify=rule.notify_on_resolve
            ):
                outcome.resolved.append(event.pk)
        elif action is Action.REFRESH:
            AlertEvent.objects.filter(pk=open_events[series].pk, resolved_at=None).update(
                last_value=verdict.recent.value, last_checked_at=now
            )
            outcome.refreshed += 1
        elif verdict.health is evaluate.Health.UNKNOWN:
            outcome.unknown += 1
    return outcome


def fire(
    rule: AlertRule, series: Series, verdict: evaluate.Verdict, now: datetime
) -> AlertEvent | None:
    """Open an event and queue its notices; None if another evaluator got there first."""
    endpoint_id, workload_id, region = series
    baseline = verdict.baseline
    try:
        with transaction.atomic():
            event = AlertEvent.objects.create(
                rule=rule,
                rule_name=rule.name,
                condition_label=rule.condition_label[:300],
                metric=rule.metric,
                endpoint_id=endpoint_id,
                workload_id=workload_id,
                region=region,
                started_at=now,
                recent_value=verdict.recent.value,
                recent_samples=verdict.recent.samples,
                baseline_value=baseline.value if baseline else None,
                baseline_samples=baseline.samples if baseline else None,
                limit_value=verdict.limit,
                last_value=verdict.recent.value,
                last_checked_at=now,
            )
            queue_notifications(event, Notification.FIRING, rule, now)
    except IntegrityError:
        log.info("rule %s series %s: already open (a concurrent evaluation won)", rule.pk, series)
        return None
    log.warning("alert firing: %s on %s (%s)", rule.name, series, verdict.reason)
    return event


def resolve(
    event: AlertEvent, now: datetime, value: float | None, reason: str, *, notify: bool
) -> bool:
    """Close an open event; True only for the one caller whose UPDATE changed the row."""
    with transaction.atomic():
        claimed = AlertEvent.objects.filter(pk=event.pk, resolved_at=None).update(
            resolved_at=now, resolved_value=value, resolution=reason
        )
        if claimed != 1:
            return False
        event.refresh_from_db()
        if notify and event.rule_id:
            queue_notifications(event, Notification.RESOLVED, event.rule, now)
    log.info("alert resolved: %s on endpoint %s (%s)", event.rule_name, event.endpoint_id, reason)
    return True


def queue_notifications(
    event: AlertEvent, transition: str, rule: AlertRule, now: datetime
) -> list[int]:
    """One Notification per enabled channel, delivered by a task once the row is committed."""
    ids = []
    for channel in rule.channels.filter(enabled=True):
        note = Notification.objects.create(
            event=event, channel=channel, transition=transition, created=now, queued_at=now
        )
        ids.append(note.pk)
        transaction.on_commit(lambda pk=note.pk: enqueue_delivery(pk))
    return ids


def enqueue_delivery(notification_id: int) -> None:
    from dashboard.alerts.tasks import deliver_notification

    try:
        deliver_notification.delay(notification_id)
    except Exception:
        # The broker is down: the notice stays queued (shown in the admin) and
        # requeue_stalled() sends it on a later evaluation.
        log.exception("could not queue notification %s", notification_id)


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
            enqueue_delivery(pk)
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
