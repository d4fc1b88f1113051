"""Alert rules, the events they raise, and the channels that carry notices.

Events are state changes only (an episode from firing to resolved), kept apart from raw
runs and kept long. Deciding lives in `dashboard/alerts/decide.py` (plain Python);
measuring and writing in `dashboard/alerts/evaluator.py` (the database side).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from dashboard.alerts import decide
from dashboard.alerts.messages import test_message
from dashboard.alerts.transports import (
    REGISTRY,
    Message,
    TransportError,
    get_transport,
    kind_choices,
)
from probes.engine.contract import ROLLUP_METRICS, RUN_FIELDS
from probes.models import CanonicalModel, Endpoint, Workload, validate_region
from probes.secrets import redact

log = logging.getLogger(__name__)

METRIC_CHOICES = [
    *((m, f"{RUN_FIELDS[m].title} ({RUN_FIELDS[m].unit})") for m in ROLLUP_METRICS),
    ("success_rate", "Success rate (ok / all runs)"),
    ("error_rate", "Error rate (429 and 5xx / all runs)"),
    ("minutes_since_ok", "Minutes since the last successful run"),
]
METRIC_LABELS = dict(METRIC_CHOICES)

CONDITION_CHOICES = [
    (decide.REGRESSION, "Regression against its own baseline"),
    (decide.THRESHOLD, "Absolute threshold"),
]

PRECEDING = "preceding"
SAME_HOURS = "same_hours"
BASELINE_CHOICES = [
    (PRECEDING, "The hours just before the recent window"),
    (SAME_HOURS, "The same hours of the previous 7 days (daily load pattern)"),
]


class Channel(models.Model):
    """Where notices go. `config` holds the kind's settings (webhook URLs with their
    tokens): it is write-only in the admin and masked everywhere it is shown."""

    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=kind_choices)
    config = models.JSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    last_error = models.TextField(blank=True, editable=False)
    last_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    disabled_reason = models.CharField(
        max_length=300,
        blank=True,
        editable=False,
        help_text="Set when a permanent delivery error switched the channel off.",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    @property
    def transport(self):
        return get_transport(self.kind)

    def clean(self) -> None:
        if self.kind in REGISTRY:  # an unknown kind is reported by the field itself
            try:
                self.config = self.transport.clean_config(self.config)
            except ValidationError as exc:
                raise ValidationError({"config": exc.messages}) from None

    @property
    def target(self) -> str:
        """Where notices go, safe to display."""
        return self.transport.describe(self.config)

    @property
    def masked_config(self) -> dict:
        return self.transport.masked_config(self.config)

    def redact(self, text: str) -> str:
        return redact(text, self.transport.secret_values(self.config))

    def send(self, message: Message) -> None:
        """Deliver now; TransportError messages come back with secrets removed."""
        try:
            self.transport().send(self.config, message)
        except TransportError as exc:
            raise TransportError(self.redact(exc.message), permanent=exc.permanent) from None

    def record_error(self, error: str, *, permanent: bool) -> None:
        now = timezone.now()
        fields = {"last_error": error, "last_error_at": now}
        if permanent:
            # Like healthchecks: a gone webhook stays off until someone looks at it.
            fields |= {"enabled": False, "disabled_reason": error[:300]}
        Channel.objects.filter(pk=self.pk).update(**fields)
        for name, value in fields.items():
            setattr(self, name, value)

    def send_test(self) -> Notification:
        """Send a test notice now (the admin's "Send test notification")."""
        note = Notification.objects.create(channel=self, transition=Notification.TEST)
        note.attempt(test_message(self), test=True)
        return note


class AlertRuleQuerySet(models.QuerySet):
    def enabled(self):
        return self.filter(enabled=True)


class AlertRule(models.Model):
    """Watch one metric over a scope (an endpoint, all endpoints of a model, or all)."""

    name = models.CharField(max_length=120)
    enabled = models.BooleanField(default=True)
    endpoint = models.ForeignKey(
        Endpoint,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="alert_rules",
        help_text="Watch this endpoint only.",
    )
    canonical_model = models.ForeignKey(
        CanonicalModel,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="alert_rules",
        help_text="Watch every endpoint serving this model. Leave both empty for all.",
    )
    workload = models.ForeignKey(
        Workload,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="alert_rules",
        help_text="Empty: each workload is watched as its own series.",
    )
    region = models.CharField(
        max_length=40,
        blank=True,
        validators=[validate_region],
        help_text="Empty: each region is watched as its own series.",
    )
    metric = models.CharField(max_length=20, choices=METRIC_CHOICES, default="ttft_ms")
    condition = models.CharField(
        max_length=20, choices=CONDITION_CHOICES, default=decide.REGRESSION
    )
    regression_pct = models.FloatField(
        "worse by more than (%)",
        null=True,
        blank=True,
        default=50,
        validators=[MinValueValidator(0.1), MaxValueValidator(10000)],
        help_text="Regression: the recent median is this much worse than the baseline "
        "median (slower latency, lower speed or success rate).",
    )
    threshold = models.FloatField(
        null=True,
        blank=True,
        help_text="Absolute threshold, in the metric's unit: fires above it for latencies, "
        "below it for output speed and success rate (a fraction, e.g. 0.95).",
    )
    recent_window_min = models.PositiveIntegerField(
        "recent window (minutes)",
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 60)],
    )
    baseline_window_h = models.PositiveIntegerField(
        "baseline window (hours)",
        default=24,
        validators=[MinValueValidator(1), MaxValueValidator(30 * 24)],
        help_text="Regression only; ends where the recent window starts (24 h, 168 h = 7 d).",
    )
    baseline_mode = models.CharField(
        "baseline", max_length=20, choices=BASELINE_CHOICES, default=PRECEDING
    )
    min_samples = models.PositiveIntegerField(
        default=5,
        validators=[MinValueValidator(1)],
        help_text="Fewer usable runs than this in the recent window: no verdict (state unchanged).",
    )
    min_baseline_samples = models.PositiveIntegerField(
        default=20,
        validators=[MinValueValidator(1)],
        help_text="Regression: fewer baseline runs than this: no verdict.",
    )
    max_p_value = models.FloatField(
        "significance (max p-value)",
        default=decide.DEFAULT_MAX_P_VALUE,
        validators=[MinValueValidator(1e-9), MaxValueValidator(1)],
        help_text="Regression: fires only when a one-sided Mann–Whitney U test of the recent "
        "runs against the baseline's gives at most this p-value (1 switches the test off).",
    )
    pending_for_min = models.PositiveIntegerField(
        "for (minutes)",
        default=0,
        validators=[MaxValueValidator(24 * 60)],
        help_text="Stay breached this long (pending) before firing; 0 fires at once.",
    )
    resolve_margin_pct = models.FloatField(
        "resolve margin (%)",
        default=decide.DEFAULT_RESOLVE_MARGIN * 100,
        validators=[MinValueValidator(0), MaxValueValidator(50)],
        help_text="A firing alert resolves once the value is this share of the limit back "
        "inside it (no flapping around the limit).",
    )
    repeat_every_min = models.PositiveIntegerField(
        "repeat every (minutes)",
        null=True,
        blank=True,
        validators=[MinValueValidator(5)],
        help_text="Remind while still firing; empty: never.",
    )
    notify_on_resolve = models.BooleanField(default=True)
    channels = models.ManyToManyField(Channel, blank=True, related_name="rules")
    notes = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = AlertRuleQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(endpoint__isnull=True) | models.Q(canonical_model__isnull=True),
                name="alertrule_one_scope",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.endpoint_id and self.canonical_model_id:
            raise ValidationError("Choose an endpoint or a model, not both.")
        if self.metric == "minutes_since_ok" and self.condition != decide.THRESHOLD:
            raise ValidationError(
                {"condition": "Staleness is a threshold: no successful run for N minutes."}
            )
        if self.condition == decide.REGRESSION and not self.regression_pct:
            raise ValidationError({"regression_pct": "A regression rule needs a percentage."})
        if self.condition == decide.THRESHOLD:
            if self.threshold is None:
                raise ValidationError({"threshold": "A threshold rule needs a threshold."})
            if self.metric in decide.RATE_METRICS and not 0 <= self.threshold <= 1:
                raise ValidationError(
                    {"threshold": "A rate is a fraction between 0 and 1, e.g. 0.95."}
                )
            if self.threshold < 0:
                raise ValidationError({"threshold": "The threshold cannot be negative."})

    @property
    def scope_label(self) -> str:
        parts = [
            str(self.endpoint or "")
            or (f"all endpoints of {self.canonical_model}" if self.canonical_model else "")
            or "all endpoints"
        ]
        if self.workload_id:
            parts.append(self.workload.slug)
        if self.region:
            parts.append(self.region)
        return " · ".join(parts)

    @property
    def condition_label(self) -> str:
        worse = "above" if self.metric in decide.HIGHER_IS_WORSE else "below"
        if self.metric == "minutes_since_ok":
            return f"no successful run for {self.threshold:g} minutes"
        if self.condition == decide.THRESHOLD:
            what = self.metric if self.metric in decide.RATE_METRICS else f"median {self.metric}"
            return f"{what} {worse} {self.threshold:g}"
        baseline = (
            "same hours of the previous 7 days"
            if self.baseline_mode == SAME_HOURS
            else f"{self.baseline_window_h} h baseline"
        )
        return (
            f"{self.metric} over {self.recent_window_min} min worse than its {baseline} "
            f"by more than {self.regression_pct:g} % (p ≤ {self.max_p_value:g})"
        )

    def as_condition(self) -> decide.Condition:
        stale = self.metric == "minutes_since_ok"  # one figure per series, not samples
        return decide.Condition(
            metric=self.metric,
            kind=self.condition,
            min_samples=1 if stale else self.min_samples,
            min_baseline_samples=self.min_baseline_samples,
            regression_pct=self.regression_pct,
            threshold=self.threshold,
            max_p_value=self.max_p_value,
            resolve_margin=self.resolve_margin_pct / 100,
        )

    def as_timing(self) -> decide.Timing:
        return decide.Timing(
            pending_for=timedelta(minutes=self.pending_for_min),
            repeat_every=timedelta(minutes=self.repeat_every_min)
            if self.repeat_every_min
            else None,
        )

    @property
    def recent_window(self) -> timedelta:
        return timedelta(minutes=self.recent_window_min)

    @property
    def baseline_window(self) -> timedelta:
        return timedelta(hours=self.baseline_window_h)

    def runs_filter(self) -> models.Q:
        """Which ProbeRun rows this rule watches."""
        q = models.Q()
        if self.endpoint_id:
            q &= models.Q(endpoint_id=self.endpoint_id)
        elif self.canonical_model_id:
            q &= models.Q(endpoint__canonical_model_id=self.canonical_model_id)
        if self.workload_id:
            q &= models.Q(workload_id=self.workload_id)
        if self.region:
            q &= models.Q(region=self.region)
        return q


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
        AlertRule, on_delete=models.SET_NULL, null=True, blank=True, related_name="events"
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
    # Values that made it fire.
    recent_value = models.FloatField()
    recent_samples = models.PositiveIntegerField()
    baseline_value = models.FloatField(null=True, blank=True)
    baseline_samples = models.PositiveIntegerField(null=True, blank=True)
    limit_value = models.FloatField(help_text="The value the recent median crossed.")
    p_value = models.FloatField(null=True, blank=True)
    effect = models.FloatField(
        null=True, blank=True, help_text="How much worse than the baseline (0.25 = 25 %)."
    )
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
        AlertEvent, on_delete=models.CASCADE, null=True, blank=True, related_name="notifications"
    )
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
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
            self.channel.record_error(exc.message, permanent=exc.permanent and not test)
            if final:
                return False
            raise
        self.status = self.SENT
        self.sent_at = now
        self.error = ""
        self.attempt_log = [*self.attempt_log, {"at": now.isoformat(), "ok": True, "error": ""}]
        self.save(update_fields=["attempts", "error", "attempt_log", "status", "sent_at"])
        self._sync_batch()
        return True

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


class SilenceQuerySet(models.QuerySet):
    def active(self, now=None):
        now = now or timezone.now()
        return self.filter(starts_at__lte=now, ends_at__gt=now)


class Silence(models.Model):
    """No notices for matching alerts until `ends_at` (maintenance, a known incident).

    Every field left empty matches anything; a silence with none set silences everything.
    Alerts still open and close while silenced — only the notices are held back."""

    provider = models.ForeignKey(
        "probes.Provider", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    canonical_model = models.ForeignKey(
        CanonicalModel, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    rule = models.ForeignKey(
        AlertRule, on_delete=models.CASCADE, null=True, blank=True, related_name="silences"
    )
    starts_at = models.DateTimeField(default=timezone.now)
    ends_at = models.DateTimeField()
    reason = models.CharField(max_length=300)
    created_by = models.CharField(max_length=150, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)

    objects = SilenceQuerySet.as_manager()

    class Meta:
        ordering = ["-ends_at"]

    def __str__(self) -> str:
        return f"{self.scope_label} until {self.ends_at:%Y-%m-%d %H:%M} ({self.reason})"

    def clean(self) -> None:
        if self.ends_at and self.starts_at and self.ends_at <= self.starts_at:
            raise ValidationError({"ends_at": "A silence ends after it starts."})

    @property
    def scope_label(self) -> str:
        parts = [
            f"{label} {value}"
            for label, value in (
                ("provider", self.provider),
                ("endpoint", self.endpoint),
                ("model", self.canonical_model),
                ("rule", self.rule),
            )
            if value is not None
        ]
        return ", ".join(parts) or "everything"

    def matches(self, event: AlertEvent) -> bool:
        endpoint = event.endpoint
        return (
            (self.provider_id is None or self.provider_id == endpoint.provider_id)
            and (self.endpoint_id is None or self.endpoint_id == event.endpoint_id)
            and (
                self.canonical_model_id is None
                or self.canonical_model_id == endpoint.canonical_model_id
            )
            and (self.rule_id is None or self.rule_id == event.rule_id)
        )


def silence_for(event: AlertEvent, now) -> Silence | None:
    """The active silence covering this event, if any."""
    return next((s for s in Silence.objects.active(now) if s.matches(event)), None)
