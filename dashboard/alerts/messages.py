"""The words and the JSON of a notice, written once for every transport, from the
AlertNotice of each alert (notice.py) in the versioned shape of notice_schema.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.urls import reverse

from dashboard.alerts.notice import AlertNotice, format_ratio, format_value, site_url
from dashboard.alerts.notice_schema import envelope
from dashboard.alerts.transports import Message

if TYPE_CHECKING:
    from dashboard.alerts.models import AlertEvent

__all__ = ["format_value", "notice_message", "site_url"]
_WORDS = {"resolved": "RESOLVED", "reminder": "STILL FIRING"}


def _size(notice: AlertNotice) -> str:
    """The subject's measure of the alert: Time to first token ×3.02 (+202 %)."""
    change = notice.change
    if change is None:
        return f"{notice.event.metric_label} {notice.value_text(notice.current)}"
    pct = f"{change.pct:+.0f}".replace("-", "−")
    return f"{notice.event.metric_label} {format_ratio(change.ratio)} ({pct} %)"


def notice_message(events: list[AlertEvent], transition: str) -> Message:
    """One message for the alerts of one group (a provider) that changed together; a
    single alert is a group of one, in the same JSON shape."""
    notices = [AlertNotice(event, transition) for event in events]
    word = _WORDS.get(transition, "FIRING")
    provider = events[0].endpoint.provider.name
    if len(notices) == 1:
        (notice,) = notices
        subject = f"[Inferwatch] {word}: {notice.event.rule_name} — {notice.series}"
        if not notice.resolved:
            subject += f": {_size(notice)}"
        lines, url = notice.lines(), site_url(notice.path)
        lines.append(f"Alert: {url}")
    else:
        subject = f"[Inferwatch] {word}: {len(notices)} alerts on {provider}"
        url = site_url(reverse("alerts:index"))
        lines = [f"- {n.line()}\n  Chart: {site_url(n.chart_path)}" for n in notices]
        lines.append(f"Alerts: {url}")
    text = "\n".join(lines)
    payload = envelope(transition, subject, text, [n.as_json() for n in notices], provider, url)
    return Message(subject=subject, text=text, payload=payload)
