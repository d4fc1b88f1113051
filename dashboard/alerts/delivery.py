"""Delivery of one notice, as a Celery task with retries.

Its own module below the evaluator: the evaluator queues deliveries and the periodic
task runs the evaluator, so neither needs to import the other's importer.
"""

from __future__ import annotations

import logging

from celery import shared_task

from dashboard.alerts.messages import event_message
from dashboard.alerts.models import Notification
from dashboard.alerts.transports import TransportError

log = logging.getLogger(__name__)


@shared_task(
    # The name it had in tasks.py: messages already queued still find it.
    name="dashboard.alerts.tasks.deliver_notification",
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
