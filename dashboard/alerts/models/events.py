"""Alert events: one episode of a series from pending through firing to resolved."""

from __future__ import annotations

from datetime import timedelta

from django.db import models
from django.utils import timezone

from dashboard.alerts.models.rules import METRIC_CHOICES, METRIC_LABELS
from probes.models import Endpoint, Workload


class AlertEventQuerySet(models.QuerySet):
    def open(self):
        """Pending or firing."""
        return self.filter(resolved_at__isnull=True)

    def firing(self):
        return self.filter(state=AlertEvent.FIRING)

    def closed(self):
        return self.filter(resolved_at__isnull=False)


class AlertEvent(models.Model):
    """One episode of a rule breached for one series (endpoint × workload × region):
    pending (waiting out the rule's `for`), then firing, then resolved. A pending episode
    that clears before firing is deleted: it never was an alert.

    Open while `resolved_at` is null; at most one open event per rule and series, which
    the database enforces (the partial unique constraint is what makes concurrent
    evaluators safe without locks).
    """

    rule = models.ForeignKey(
        "alerts.AlertRule", on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
    )
    # Copied from the rule so history still reads right after the rule changes or goes.
    rule_name = models.CharField(max_length=120)
    condition_label = models.CharField(max_length=300)
    metric = models.CharField(max_length=20, choices=METRIC_CHOICES)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="alert_events")
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="alert_events")
    region = models.CharField(max_length=40)

    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"
    STATES = [(PENDING, "pending"), (FIRING, "firing"), (RESOLVED, "resolved")]
    state = models.CharField(max_length=10, choices=STATES, default=FIRING)

    started_at = models.DateTimeField(help_text="When the breach began (pending or firing).")
    fired_at = models.DateTimeField(null=True, blank=True)
    # Last time a notice was queued for it (firing or reminder); null while silenced.
    notified_at = models.DateTimeField(null=True, blank=True)
    silenced = models.BooleanField(
        default=False, help_text="A silence matched when it fired: no notice was sent."
    )
    # Values that made it fire. recent_value is the level the series was at: the median
    # of the runs since the change for a CUSUM regression, else of the recent window.
    recent_value = models.FloatField()
    recent_samples = models.PositiveIntegerField()
    baseline_value = models.FloatField(null=True, blank=True)
    baseline_samples = models.PositiveIntegerField(null=True, blank=True)
    limit_value = models.FloatField(help_text="The value the recent median crossed.")
    p_value = models.FloatField(null=True, blank=True)
    effect = models.FloatField(
        null=True, blank=True, help_text="How much worse than the baseline (0.25 = 25 %)."
    )
    # When the changed level began: the first run of the CUSUM's climb that fired it
    # (null for other tests: then the notice counts from started_at).
    changed_at = models.DateTimeField(null=True, blank=True)
    # When the recent window that made it fire began (the chart's shaded window).
    window_start = models.DateTimeField(null=True, blank=True)
    # Latest values while it keeps firing.
    last_value = models.FloatField(null=True, blank=True)
    last_checked_at = models.DateTimeField(null=True, blank=True)

    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_value = models.FloatField(null=True, blank=True)
    resolution = models.CharField(max_length=100, blank=True)

    objects = AlertEventQuerySet.as_manager()

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "endpoint", "workload", "region"],
                condition=models.Q(resolved_at__isnull=True),
                name="alertevent_one_open_per_series",
            )
        ]
        indexes = [
            # The alerts page and endpoint pages: open events, newest first.
            models.Index(
                fields=["endpoint", "-started_at"],
                name="alertevent_open_idx",
                condition=models.Q(resolved_at__isnull=True),
            ),
            models.Index(fields=["-started_at"], name="alertevent_recent_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_name}: {self.endpoint} ({self.state})"

    def save(self, *args, **kwargs) -> None:
        if self.resolved_at is not None:  # closed is resolved, however it was written
            self.state = self.RESOLVED
        super().save(*args, **kwargs)

    @property
    def is_open(self) -> bool:
        return self.resolved_at is None

    @property
    def metric_label(self) -> str:
        return METRIC_LABELS.get(self.metric, self.metric)

    @property
    def current_value(self) -> float:
        if not self.is_open and self.resolved_value is not None:
            return self.resolved_value
        return self.last_value if self.last_value is not None else self.recent_value

    @property
    def duration(self) -> timedelta:
        return (self.resolved_at or timezone.now()) - self.started_at
