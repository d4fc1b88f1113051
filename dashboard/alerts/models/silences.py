"""Silences and maintenance windows: notices held back, alerts still tracked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from probes.models import CanonicalModel, Endpoint, MaintenanceWindow
from probes.scheduling import maintenance

if TYPE_CHECKING:
    from dashboard.alerts.models.events import AlertEvent


class SilenceQuerySet(models.QuerySet):
    def active(self, now=None):
        now = now or timezone.now()
        return self.filter(starts_at__lte=now, ends_at__gt=now)


class Silence(models.Model):
    """No notices for matching alerts until `ends_at` (maintenance, a known incident).

    Every field left empty matches anything; a silence with none set silences everything,
    so only a superuser may make one (``scope_refusal``: /alerts/ and the admin check it).
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
        "alerts.AlertRule", on_delete=models.CASCADE, null=True, blank=True, related_name="silences"
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


SCOPE_FIELDS = ("provider", "endpoint", "canonical_model", "rule")


def scope_refusal(user, cleaned: dict) -> str | None:
    """Why ``user`` may not make a silence of these (form-cleaned) fields, or None: one
    with no scope holds back every notice of every rule, so it needs a superuser."""
    if any(cleaned.get(name) for name in SCOPE_FIELDS):
        return None
    if user.is_active and user.is_superuser:
        return None
    return (
        "A silence needs a scope: a rule, a provider, a model or an endpoint. Only a "
        "superuser may silence everything."
    )


def silence_for(event: AlertEvent, now) -> Silence | MaintenanceWindow | None:
    """The active silence covering this event, if any, else an active maintenance window of
    its endpoint or provider (probes/models/maintenance.py): notices wait until it ends."""
    silence = next((s for s in Silence.objects.active(now) if s.matches(event)), None)
    return silence or maintenance.window_at(event.endpoint, now)
