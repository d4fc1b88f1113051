"""What happened on a history chart's time axis besides the runs: alerts firing and
resolving, and configuration changes that move a series (a new list price, a probe
added, and from the audit history (django-simple-history) a probe's interval or workload
changed, a price edited, the provider's URL moved). Drawn as thin vertical lines with a
hover label (charts.history). Labels never name who changed what: the charts are public,
the admin's History shows the user to staff."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time
from urllib.parse import urlsplit

from django.db.models import Q

from dashboard.alerts.models import AlertEvent
from dashboard.templatetags.web_format import usd
from probes.models import Endpoint, Price, Probe, Provider, Workload

# A chart has room for so many marks; a script editing a probe in a loop must not make a
# page slow or unreadable.
MAX_CHANGE_MARKS = 200


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
    # Only probes that run: a disabled catalog endpoint's probes added nothing to a chart.
    probes = Probe.objects.active().filter(endpoint_id__in=ids, created__range=(start, now))
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
            text = f"new price on {price.endpoint.model_id}: {_price_text(price)}"
            marks.append(Mark(when, "config", text))
    for probe in probes.select_related("endpoint", "workload"):
        marks.append(
            Mark(
                probe.created,
                "config",
                f"probe added: {probe.workload.slug} on {probe.endpoint.model_id} "
                f"every {probe.interval_s} s",
            )
        )
    marks += change_marks(endpoints, start, now, workload)
    return sorted(marks, key=lambda m: m.t)


def _price_text(price) -> str:
    return f"{usd(price.input_per_m)} in / {usd(price.output_per_m)} out per M"


def _edits(model, start: datetime, now: datetime, **scope) -> Iterable:
    """(record, the record before it) for each edit ("~") of `model` inside the window."""
    records = model.history.filter(
        history_type="~", history_date__range=(start, now), **scope
    ).order_by("history_date")[:MAX_CHANGE_MARKS]
    for record in records:
        previous = record.prev_record
        if previous is not None:
            yield record, previous


def change_marks(
    endpoints: Sequence[Endpoint], start: datetime, now: datetime, workload: Workload | None
) -> list[Mark]:
    """Interval, workload, price and URL changes from the audit history."""
    ids = [e.pk for e in endpoints]
    names = {e.pk: e.model_id for e in endpoints}
    marks = []
    slugs = dict(Workload.objects.values_list("pk", "slug"))
    for record, before in _edits(Probe, start, now, endpoint_id__in=ids):
        if workload is not None and workload.pk not in (record.workload_id, before.workload_id):
            continue
        on = f"on {names[record.endpoint_id]}"
        if record.interval_s != before.interval_s:
            text = f"probe interval {before.interval_s} s → {record.interval_s} s"
            marks.append(Mark(record.history_date, "config", f"{text} {on}"))
        if record.workload_id != before.workload_id:
            old, new = slugs.get(before.workload_id, "?"), slugs.get(record.workload_id, "?")
            marks.append(Mark(record.history_date, "config", f"probe workload {old} → {new} {on}"))
    for record, before in _edits(Price, start, now, endpoint_id__in=ids):
        if _price_text(record) != _price_text(before):
            text = f"price edited on {names[record.endpoint_id]}: {_price_text(record)}"
            marks.append(Mark(record.history_date, "config", text))
    providers = {e.provider_id for e in endpoints}
    for record, before in _edits(Provider, start, now, id__in=providers):
        if record.base_url != before.base_url:
            # The host only: a path may carry an account or deployment name.
            host = urlsplit(record.base_url).hostname or "?"
            text = f"{record.name}'s URL moved to {host}"
            marks.append(Mark(record.history_date, "config", text))
    return marks
