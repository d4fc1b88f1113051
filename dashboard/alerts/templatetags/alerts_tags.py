"""Template helpers for alert pages and the endpoint page's active-alerts partial."""

from __future__ import annotations

from django import template

from dashboard.alerts.notice import AlertNotice, format_value
from dashboard.alerts.queries import active_alerts_for

register = template.Library()


@register.simple_tag
def active_alerts(endpoint):
    """{% active_alerts endpoint as alerts %} — open events of one endpoint."""
    if endpoint is None or endpoint == "":
        return []
    return list(active_alerts_for(endpoint))


@register.filter
def metric_value(value, metric: str) -> str:
    """{{ event.recent_value|metric_value:event.metric }} → 412 ms, 1,830 tok/s, 97.5 %."""
    return format_value(metric, value)


@register.filter
def notice(event) -> AlertNotice:
    """{% with n=event|notice %}: the facts every notice states, for pages to show alike."""
    return AlertNotice(event)
