"""Read-side queries for pages that show alerts."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from dashboard.alerts.models import AlertEvent, AlertRule
from probes.models import Endpoint, Workload

_RELATED = ("endpoint__provider", "endpoint__canonical_model", "workload", "rule")


def active_alerts_for(endpoint: Endpoint | int) -> QuerySet[AlertEvent]:
    """Open events of one endpoint, newest first (for the endpoint page's partial)."""
    endpoint_id = endpoint.pk if isinstance(endpoint, Endpoint) else endpoint
    return AlertEvent.objects.firing().filter(endpoint_id=endpoint_id).select_related(*_RELATED)


def active_alerts() -> QuerySet[AlertEvent]:
    """Firing events (pending ones are not alerts yet)."""
    return AlertEvent.objects.firing().select_related(*_RELATED)


def pending_alerts() -> QuerySet[AlertEvent]:
    return AlertEvent.objects.open().filter(state=AlertEvent.PENDING).select_related(*_RELATED)


def firing_by_endpoint(endpoint_ids) -> dict[int, list[AlertEvent]]:
    """Firing alerts of these endpoints (the badges on leaderboard rows), one query."""
    firing: dict[int, list[AlertEvent]] = {}
    events = AlertEvent.objects.firing().filter(endpoint_id__in=list(endpoint_ids))
    for event in events.select_related("workload").order_by("started_at"):
        firing.setdefault(event.endpoint_id, []).append(event)
    return firing


def recent_history(days: int = 30, limit: int = 100) -> QuerySet[AlertEvent]:
    """Resolved events of the last `days`, newest first."""
    since = timezone.now() - timedelta(days=days)
    return (
        AlertEvent.objects.closed().filter(started_at__gte=since).select_related(*_RELATED)[:limit]
    )


def configured_rules() -> list[AlertRule]:
    """Every rule, enabled first, with its scope's rows for the labels."""
    rules = AlertRule.objects.select_related("endpoint__provider", "canonical_model", "workload")
    return sorted(rules, key=lambda r: (not r.enabled, r.name))


def series_rows(rule: AlertRule) -> list[dict]:
    """The rule's series at its last evaluation, firing first: endpoint, workload, region,
    state and the recent value (two queries for the names)."""
    rows = rule.series_states or []
    endpoints = Endpoint.objects.select_related("provider").in_bulk({r[0] for r in rows})
    workloads = Workload.objects.in_bulk({r[1] for r in rows})
    order = {"firing": 0, "pending": 1, "ok": 2, "not enough data": 3}
    return sorted(
        (
            {
                "endpoint": endpoints.get(endpoint_id),
                "workload": workloads.get(workload_id),
                "region": region,
                "state": state,
                "value": value,
            }
            for endpoint_id, workload_id, region, state, value in rows
        ),
        key=lambda row: order.get(row["state"], 4),
    )
