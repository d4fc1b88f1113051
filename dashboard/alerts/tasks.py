"""Celery tasks: periodic evaluation, and delivery of each notice with retries."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from dashboard.alerts import evaluator
from dashboard.alerts.messages import event_message
from dashboard.alerts.models import Notification
from dashboard.alerts.transports import TransportError

log = logging.getLogger(__name__)


@shared_task(ignore_result=True, acks_late=True, time_limit=120, soft_time_limit=100)
def evaluate_alert_rules() -> dict:
    """Evaluate every enabled rule against the raw runs of its windows (runs every minute
    from beat; safe to run concurrently or twice — see evaluator.py)."""
    summary = evaluator.evaluate_all(timezone.now())
    if summary["fired"] or summary["resolved"] or summary["errors"]:
        log.info("alert evaluation: %s", summary)
    return summary


@shared_task(
    bind=True,
    ignore_result=True,
    acks_late=True,
    time_limit=60,
    autoretry_for=(TransportError,),
    retry_backoff=30,
    retry_backoff_max=600,
    retry_jitter=True,
    max_retries=6,
)
def deliver_notification(self, notification_id: int) -> str:
    """Send one notice. Transient errors retry with backoff (about 30 min in all); a
    permanent one switches the channel off. Never raises anything but a retry."""
    note = (
        Notification.objects.select_related(
            "channel",
            "event__endpoint__provider",
            "event__endpoint__canonical_model",
            "event__workload",
        )
        .filter(pk=notification_id)
        .first()
    )
    if note is None:
        log.info("notification %s is gone; nothing to send", notification_id)
        return "missing"
    if note.status != Notification.QUEUED:
        return note.status  # a redelivered task: already sent or failed
    if not note.channel.enabled:
        Notification.objects.filter(pk=note.pk, status=Notification.QUEUED).update(
            status=Notification.FAILED, error="channel disabled"
        )
        return Notification.FAILED
    try:
        note.attempt(event_message(note.event, note.transition))
    except TransportError:
        if self.request.retries >= self.max_retries:
            note.give_up()
            return Notification.FAILED
        raise
    return note.status
