"""Recurring maintenance windows (the Gatus shape: start, duration, time zone, days):
daily, or weekly on chosen weekdays ("every Sunday 02:00–04:00 UTC")."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.core.exceptions import ValidationError
from django.db import models

from probes.models.providers import Endpoint, Provider

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def validate_time_zone(name: str) -> None:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"Unknown time zone {name!r} (an IANA name: Europe/Paris).") from None


def validate_days(days) -> None:
    if not isinstance(days, list) or not all(isinstance(d, str) for d in days):
        raise ValidationError("Days are a list of weekday names (empty: every day).")
    unknown = [d for d in days if d.lower() not in WEEKDAYS]
    if unknown:
        raise ValidationError(f"Unknown day {unknown[0]!r}; days: {', '.join(WEEKDAYS)}.")


def normalised_days(days: list[str]) -> list[str]:
    """Weekday names as stored: lower case, Monday first, once each; all seven is every
    day (empty), so one schedule has one form (the admin's boxes, the label)."""
    named = {d.lower() for d in days}
    ordered = [d for d in WEEKDAYS if d in named]
    return [] if len(ordered) == len(WEEKDAYS) else ordered


class MaintenanceWindowQuerySet(models.QuerySet):
    def covering(self, endpoint: Endpoint):
        """Enabled windows of the endpoint or of its whole provider."""
        return self.filter(enabled=True).filter(
            models.Q(endpoint=endpoint) | models.Q(provider_id=endpoint.provider_id)
        )


class MaintenanceWindow(models.Model):
    """A planned, recurring pause of one endpoint or of a whole provider (its own server's
    nightly restart): alerts are held while it lasts and history charts show it. Probes
    keep running (their runs fall inside the window on the charts) or pause."""

    name = models.CharField(max_length=100, unique=True)
    provider = models.ForeignKey(
        Provider, on_delete=models.CASCADE, null=True, blank=True, related_name="maintenance"
    )
    endpoint = models.ForeignKey(
        Endpoint, on_delete=models.CASCADE, null=True, blank=True, related_name="maintenance"
    )
    start = models.TimeField(help_text="Local time in the window's time zone (23:00).")
    duration = models.DurationField(help_text="How long it lasts (01:00:00 for an hour).")
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])
    days = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_days],
        help_text='Weekly: the weekdays it recurs on, e.g. ["sunday"] or ["monday", '
        '"thursday"]; empty: every day.',
    )
    pause_probes = models.BooleanField(
        default=False,
        help_text="Pause this scope's probes during the window (else they keep running).",
    )
    enabled = models.BooleanField(default=True)
    reason = models.CharField(max_length=300, blank=True)

    objects = MaintenanceWindowQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if (self.provider_id is None) == (self.endpoint_id is None):
            raise ValidationError("A maintenance window names a provider or an endpoint (one).")
        if self.duration is not None and not timedelta(0) < self.duration <= timedelta(days=7):
            raise ValidationError({"duration": "Between a second and 7 days."})
        try:
            validate_days(self.days)
        except ValidationError:
            return  # said on the field (its validator)
        self.days = normalised_days(self.days)

    @property
    def schedule_label(self) -> str:
        """'every Sunday 02:00–04:00 UTC', 'every day 23:00–00:30 (next day) Europe/Paris',
        'every Monday and Thursday 03:00 for 36 h UTC'."""
        days = [d.capitalize() for d in normalised_days(self.days)]
        when = (
            "every day"
            if not days
            else "every "
            + " and ".join([", ".join(days[:-1]), days[-1]] if len(days) > 1 else days)
        )
        start = f"{self.start:%H:%M}"
        if self.duration >= timedelta(days=1):
            span = f"{start} for {self.duration.total_seconds() / 3600:g} h"
        else:
            end = datetime.combine(date.min, self.start) + self.duration
            later = " (next day)" if end.date() > date.min else ""
            span = f"{start}–{end:%H:%M}{later}"
        return f"{when} {span} {self.time_zone}"

    def occurrences(self, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """Every [from, to) of the window that overlaps [start, end), in UTC."""
        zone = ZoneInfo(self.time_zone)
        days = {WEEKDAYS.index(d.lower()) for d in self.days} or set(range(7))
        first = (start - self.duration).astimezone(zone).date() - timedelta(days=1)
        last = end.astimezone(zone).date()
        out = []
        day: date = first
        while day <= last:
            if day.weekday() in days:
                begins = datetime.combine(day, self.start, tzinfo=zone).astimezone(UTC)
                ends = begins + self.duration  # absolute time: right across a DST change
                if begins < end and ends > start:
                    out.append((begins, ends))
            day += timedelta(days=1)
        return out

    def active_at(self, when: datetime) -> bool:
        return bool(self.occurrences(when, when + timedelta(microseconds=1)))
