"""Delivering notices: queueing, grouping into one message per provider, retrying.

Grouping, like Alertmanager's group_wait: a notice is handed to the broker with a
countdown of GROUP_WAIT_S. Whichever delivery task runs first claims every notice still
queued for the same channel, transition and group key (the provider) by stamping them
with one batch id in a single conditional UPDATE, and sends one message listing them;
the other tasks find their notice already claimed and stop. A provider outage across
twelve endpoints is one message when it starts and one when it ends.

The evaluator imports this module (to queue) and tasks.py re-exports the task; nothing
here imports the evaluator, so the two no longer import each other.
"""

from __future__ import annotations

import logging
import random
import uuid

from celery import shared_task
from django.conf import settings
from django.db import transaction

from dashboard.alerts.messages import notice_message
from dashboard.alerts.models import AlertEvent, Notification
from dashboard.alerts.transports import TransportError

log = logging.getLogger(__name__)
_BATCH_NAMESPACE = uuid.UUID("6f1d3c1e-8d0a-4d59-9a49-1c0e6a3b2f10")


def group_wait_s() -> float:
    return float(getattr(settings, "ALERTS_GROUP_WAIT_S", 30.0))


def enqueue_delivery(notification_id: int, countdown: float | None = None) -> None:
    try:
        deliver_notification.apply_async(
            (notification_id,), countdown=group_wait_s() if countdown is None else countdown
        )
    except Exception:
        # The broker is down: the notice stays queued (shown in the admin) and
        # requeue_stalled() sends it on a later evaluation.
        log.exception("could not queue notification %s", notification_id)


def queue_notices(event: AlertEvent, transition: str, channels, now) -> list[int]:
    """One Notification per channel, delivered by a task once the row is committed."""
    ids = []
    group_key = f"provider:{event.endpoint.provider_id}"
    for channel in channels:
        note = Notification.objects.create(
            event=event,
            channel=channel,
            transition=transition,
            group_key=group_key,
            created=now,
            queued_at=now,
        )
        ids.append(note.pk)
        transaction.on_commit(lambda pk=note.pk: enqueue_delivery(pk))
    return ids


def claim_batch(note: Notification) -> list[Notification]:
    """Stamp this notice and its queued siblings with one batch id; [] if another task's
    batch holds it. The id is derived from the leading notice, so a retried task knows
    its own batch again and never sends another task's."""
    batch = uuid.uuid5(_BATCH_NAMESPACE, str(note.pk))
    if note.batch not in (None, batch):
        return []
    if note.batch is None:
        siblings = Notification.objects.filter(
            status=Notification.QUEUED,
            batch__isnull=True,
            channel_id=note.channel_id,
            transition=note.transition,
            event__isnull=False,
        )
        siblings = siblings.filter(group_key=note.group_key) if note.group_key else siblings
        with transaction.atomic():
            mine = Notification.objects.filter(pk=note.pk, batch__isnull=True).update(batch=batch)
            if not mine:
                return []
            siblings.exclude(pk=note.pk).update(batch=batch)
        note.batch = batch
    return list(
        Notification.objects.filter(batch=note.batch)
        .select_related(
            "channel",
            "event__endpoint__provider",
            "event__endpoint__canonical_model",
            "event__workload",
        )
        .order_by("event__endpoint__model_id", "event__workload__slug", "event__region", "pk")
    )


def retry_delay_s(retries: int) -> float:
    """Exponential backoff with full jitter: base, 2×base, 4×base … capped at 10 min."""
    base = float(getattr(settings, "ALERTS_RETRY_BASE_S", 30.0))
    return random.uniform(0.5, 1.0) * min(600.0, base * 2**retries)


def max_retries() -> int:
    return int(getattr(settings, "ALERTS_MAX_RETRIES", 6))


@shared_task(
    bind=True,
    name="dashboard.alerts.tasks.deliver_notification",  # the name queued notices carry
    ignore_result=True,
    acks_late=True,
    time_limit=60,
    max_retries=None,  # counted against ALERTS_MAX_RETRIES below (settings, not import time)
)
def deliver_notification(self, notification_id: int) -> str:
    """Send one notice, with its batch. Transient errors retry with backoff (about 30 min
    in all by default); a permanent error, or retries running out, fails the notice and
    switches the channel off with the reason shown. Never raises anything but a retry."""
    note = Notification.objects.select_related("channel").filter(pk=notification_id).first()
    if note is None:
        log.info("notification %s is gone; nothing to send", notification_id)
        return "missing"
    if note.status != Notification.QUEUED:
        return note.status  # a redelivered task, or sent with another notice's batch
    if not note.channel.enabled:
        mine = Notification.objects.filter(pk=note.pk)
        if note.batch:
            mine = Notification.objects.filter(batch=note.batch)
        mine.filter(status=Notification.QUEUED).update(
            status=Notification.FAILED, error="channel disabled"
        )
        return Notification.FAILED
    notes = claim_batch(note)
    if not notes:
        return "claimed"  # another task sends it with its batch
    note = next(n for n in notes if n.pk == note.pk)
    try:
        message = notice_message([n.event for n in notes], note.transition)
    except Exception as exc:  # a notice that cannot be rendered must not stay queued
        log.exception("notification %s could not be rendered", note.pk)
        failure = f"the notice could not be rendered ({type(exc).__name__})"
        note.attempts += 1
        note.record_failure(TransportError(failure, permanent=True, channel_fault=False))
        return Notification.FAILED
    try:
        note.attempt(message)
    except TransportError as exc:
        if self.request.retries >= max_retries():
            note.give_up(f"{self.request.retries + 1} attempts failed, last: {exc.message}")
            return Notification.FAILED
        raise self.retry(countdown=retry_delay_s(self.request.retries)) from None
    return note.status
