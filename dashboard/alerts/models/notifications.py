"""Notices: one per channel and transition, with every delivery attempt logged."""

from __future__ import annotations

import logging

from django.db import models
from django.utils import timezone

from dashboard.alerts.transports import (
    Message,
    TransportError,
)

log = logging.getLogger(__name__)


class Notification(models.Model):
    """One notice to one channel, with every delivery attempt recorded."""

    FIRING = "firing"
    RESOLVED = "resolved"
    REMINDER = "reminder"
    TEST = "test"
    TRANSITIONS = [
        (FIRING, "firing"),
        (RESOLVED, "resolved"),
        (REMINDER, "reminder"),
        (TEST, "test"),
    ]

    QUEUED = "queued"
    SENT = "sent"
    FAILED = "failed"
    STATUSES = [(QUEUED, "queued"), (SENT, "sent"), (FAILED, "failed")]

    event = models.ForeignKey(
        "alerts.AlertEvent",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="notifications",
    )
    channel = models.ForeignKey(
        "alerts.Channel", on_delete=models.CASCADE, related_name="notifications"
    )
    transition = models.CharField(max_length=10, choices=TRANSITIONS)
    # Notices to one channel with the same transition and group key (the provider) that
    # are queued within the group wait go out as one message; `batch` marks which.
    group_key = models.CharField(max_length=100, blank=True)
    batch = models.UUIDField(null=True, blank=True, db_index=True)
    status = models.CharField(max_length=10, choices=STATUSES, default=QUEUED)
    attempts = models.PositiveSmallIntegerField(default=0)
    error = models.TextField(blank=True)
    # [{"at": iso time, "ok": bool, "error": str}] — one entry per delivery attempt.
    attempt_log = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(default=timezone.now)
    # When it was last handed to the broker (moved forward by requeue_stalled).
    queued_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        constraints = [
            # One notice per event, channel and transition: a redelivered evaluation task
            # cannot notify twice. Reminders repeat by design.
            models.UniqueConstraint(
                fields=["event", "channel", "transition"],
                condition=models.Q(event__isnull=False) & ~models.Q(transition="reminder"),
                name="notification_once_per_transition",
            )
        ]
        indexes = [
            models.Index(
                fields=["queued_at"],
                name="notification_queued_idx",
                condition=models.Q(status="queued"),
            )
        ]

    def __str__(self) -> str:
        return f"{self.transition} → {self.channel.name}: {self.status}"

    def attempt(self, message: Message, *, test: bool = False) -> bool:
        """Try to deliver once and record the attempt.

        Returns True when sent. A transient error is recorded and re-raised so the task
        retries it; a permanent one fails the notice and switches the channel off. A test
        notice is tried once and never switches the channel off: its sender is watching.
        """
        now = timezone.now()
        self.attempts += 1
        try:
            self.channel.send(message)
        except TransportError as exc:
            if self.record_failure(exc, now, test=test):
                return False
            raise
        self.status = self.SENT
        self.sent_at = now
        self.error = ""
        self.attempt_log = [*self.attempt_log, {"at": now.isoformat(), "ok": True, "error": ""}]
        self.save(update_fields=["attempts", "error", "attempt_log", "status", "sent_at"])
        self._sync_batch()
        return True

    def record_failure(self, exc: TransportError, now=None, *, test: bool = False) -> bool:
        """Record a failed attempt, shown in the admin; True when it is final (permanent,
        or a test notice), which fails the notice (and its batch)."""
        now = now or timezone.now()
        self.error = exc.message
        self.attempt_log = [
            *self.attempt_log,
            {"at": now.isoformat(), "ok": False, "error": exc.message},
        ]
        log.warning(
            "notification %s to channel %s failed (%s): %s",
            self.pk,
            self.channel_id,
            "permanent" if exc.permanent else "will retry",
            exc.message,
        )
        final = exc.permanent or test
        if final:
            self.status = self.FAILED
        self.save(update_fields=["attempts", "error", "attempt_log", "status"])
        self._sync_batch()
        switch_off = exc.permanent and exc.channel_fault and not test
        self.channel.record_error(exc.message, permanent=switch_off)
        return final

    def _sync_batch(self) -> None:
        """The other notices of a grouped message share its fate and its attempt log."""
        if self.batch:
            Notification.objects.filter(batch=self.batch).exclude(pk=self.pk).update(
                status=self.status,
                attempts=self.attempts,
                error=self.error,
                attempt_log=self.attempt_log,
                sent_at=self.sent_at,
            )

    def give_up(self, reason: str) -> None:
        """Retries exhausted: the notice failed, and the channel is switched off and says
        why (a receiver dead for half an hour is not coming back by itself; whoever
        fixes it switches the channel on again)."""
        self.channel.record_error(reason, permanent=True)
        mine = models.Q(pk=self.pk) | (models.Q(batch=self.batch) if self.batch else models.Q())
        Notification.objects.filter(mine, status=self.QUEUED).update(status=self.FAILED)
        self.status = self.FAILED
