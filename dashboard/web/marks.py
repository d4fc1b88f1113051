"""What happened on a history chart's time axis besides the runs: alerts firing and
resolving, and configuration changes that move a series (a new list price, a probe
added). Drawn as thin vertical lines with a hover label (charts.history)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time

from django.db.models import Q

from dashboard.alerts.models import AlertEvent
from dashboard.templatetags.web_format import usd
from probes.models import Endpoint, Price, Probe, Workload


@dataclass(frozen=True)
class Mark:
    t: datetime
    kind: str  # "fired", "resolved" or "config"
    label: str


def history_marks(
    endpoints: Sequence[Endpoint], start: datetime, now: datetime, workload: Workload | None
) -> list[Mark]:
    """The marks inside [start, now] for these endpoints (and the page's workload)."""
    ids = [e.pk for e in endpoints]
    in_window = Q(fired_at__range=(start, now)) | Q(resolved_at__range=(start, now))
    events = AlertEvent.objects.filter(in_window, endpoint_id__in=ids).select_related("endpoint")
    probes = Probe.objects.filter(endpoint_id__in=ids, created__range=(start, now))
    if workload is not None:
        events = events.filter(workload=workload)
        probes = probes.filter(workload=workload)
    marks = []
    for event in events:
        where = f"{event.rule_name} on {event.endpoint.model_id}"
        if event.fired_at and start <= event.fired_at <= now:
            marks.append(Mark(event.fired_at, "fired", f"alert fired: {where}"))
        if event.resolved_at and start <= event.resolved_at <= now:
            marks.append(Mark(event.resolved_at, "resolved", f"alert resolved: {where}"))
    prices = Price.objects.filter(
        endpoint_id__in=ids, effective_from__gt=start.date(), effective_from__lte=now.date()
    ).select_related("endpoint")
    for price in prices:
        when = datetime.combine(price.effective_from, time(), UTC)
        if start <= when:
            text = f"{usd(price.input_per_m)} in / {usd(price.output_per_m)} out per M"
            marks.append(Mark(when, "config", f"new price on {price.endpoint.model_id}: {text}"))
    for probe in probes.select_related("endpoint", "workload"):
        marks.append(
            Mark(
                probe.created,
                "config",
                f"probe added: {probe.workload.slug} on {probe.endpoint.model_id} "
                f"every {probe.interval_s} s",
            )
        )
    return sorted(marks, key=lambda m: m.t)
