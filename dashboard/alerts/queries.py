"""Read-side queries for pages that show alerts."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from dashboard.alerts.models import AlertEvent
from probes.models import Endpoint

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
