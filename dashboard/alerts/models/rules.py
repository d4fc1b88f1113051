"""Alert rules: what to watch, how to decide, and where notices go."""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from dashboard.alerts import decide
from dashboard.alerts.defaults import (
    CUSUM,
    DEFAULT,
    PRECEDING,
    SAME_HOURS,
    TEST_CHOICES,
)
from probes.engine.contract import ROLLUP_METRICS, RUN_FIELDS
from probes.models import CanonicalModel, Endpoint, Workload, validate_region
from probes.models.audit import AuditedHistory

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

BASELINE_CHOICES = [
    (PRECEDING, "The hours just before the recent window"),
    (SAME_HOURS, "The same hours of the previous 7 days (daily load pattern)"),
]


# A series' state as /alerts/ shows it: the event's, or ok, or too few runs to say.
SERIES_STATES = ("firing", "pending", "ok", "not enough data")


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
        default=DEFAULT.regression_pct,
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
        default=DEFAULT.recent_window_min,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 60)],
        help_text="Regression: the runs the test reads (the CUSUM's memory).",
    )
    baseline_window_h = models.PositiveIntegerField(
        "baseline window (hours)",
        default=DEFAULT.baseline_window_h,
        validators=[MinValueValidator(1), MaxValueValidator(30 * 24)],
        help_text="Regression only; ends where the recent window starts. A lasting change "
        "becomes the new baseline (its alert resolves) once it fills half of it: after the "
        "recent window and half the baseline's.",
    )
    baseline_mode = models.CharField(
        "baseline", max_length=20, choices=BASELINE_CHOICES, default=DEFAULT.baseline_mode
    )
    test = models.CharField(
        "regression test",
        max_length=20,
        choices=TEST_CHOICES,
        default=DEFAULT.test,
        help_text="How a regression is decided (the benchmark behind the default: README, Alerts).",
    )
    min_samples = models.PositiveIntegerField(
        default=DEFAULT.min_samples,
        validators=[MinValueValidator(1)],
        help_text="Fewer usable runs than this in the recent window: no verdict (state unchanged).",
    )
    min_baseline_samples = models.PositiveIntegerField(
        default=DEFAULT.min_baseline_samples,
        validators=[MinValueValidator(1)],
        help_text="Regression: fewer baseline runs than this: no verdict.",
    )
    max_p_value = models.FloatField(
        "significance (max p-value)",
        default=decide.DEFAULT_MAX_P_VALUE,
        validators=[MinValueValidator(1e-9), MaxValueValidator(1)],
        help_text="Mann–Whitney test only: fires only when a one-sided Mann–Whitney U test of "
        "the recent runs against the baseline's gives at most this p-value (1 switches the "
        "test off).",
    )
    pending_for_min = models.PositiveIntegerField(
        "for (minutes)",
        default=DEFAULT.pending_for_min,
        validators=[MaxValueValidator(24 * 60)],
        help_text="Stay breached this long (pending) before firing; 0 fires at once.",
    )
    resolve_margin_pct = models.FloatField(
        "resolve margin (%)",
        default=DEFAULT.resolve_margin_pct,
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
    channels = models.ManyToManyField("alerts.Channel", blank=True, related_name="rules")
    notes = models.TextField(blank=True)
    # What the last evaluation saw, for /alerts/ (written by the evaluator each minute):
    # [[endpoint id, workload id, region, state, value], ...], state one of SERIES_STATES.
    last_evaluated_at = models.DateTimeField(null=True, blank=True, editable=False)
    series_states = models.JSONField(default=list, blank=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = AlertRuleQuerySet.as_manager()
    # The channels too: who added or took off where a rule's notices go is history.
    history = AuditedHistory(m2m_fields=["channels"])

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
        evidence = "CUSUM" if self.test == CUSUM else f"p ≤ {self.max_p_value:g}"
        return (
            f"{self.metric} over {self.recent_window_min} min worse than its {baseline} "
            f"by more than {self.regression_pct:g} % ({evidence})"
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
            test=self.test,
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

    def state_counts(self) -> dict[str, int]:
        """How many series the last evaluation found in each state (all states listed)."""
        counts = dict.fromkeys(SERIES_STATES, 0)
        for *_, state, _value in self.series_states:
            counts[state] = counts.get(state, 0) + 1
        return counts

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
