"""The words and the JSON of a notice, written once for every transport."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.urls import reverse

from dashboard.alerts.transports import Message

if TYPE_CHECKING:
    from dashboard.alerts.models import AlertEvent

_UNITS = {
    "ttft_ms": "ms",
    "ttfat_ms": "ms",
    "e2e_ms": "ms",
    "output_tps": "tok/s",
    "prefill_tps": "tok/s",
    "first_sentence_ms": "ms",
    "tool_call_ms": "ms",
    "cold_ttft_ms": "ms",
    "ttft_saved_pct": "%",
    "cost_saved_pct": "%",
    "slowdown": "×",
    "server_queue_ms": "ms",
    "energy_j_per_token": "J/token",
    "output_tokens_per_j": "tok/J",
    "minutes_since_ok": "min",
}


def format_value(metric: str, value: float | None) -> str:
    """A metric value as people read it: 412 ms, 1,830 tok/s, 97.5 %."""
    if value is None:
        return "—"
    if metric in ("success_rate", "error_rate"):
        return f"{value * 100:.1f} %"
    unit = _UNITS.get(metric, "")
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 1 else 3  # 0.042 J/token
    return f"{value:,.{digits}f} {unit}".strip()


def site_url(path: str) -> str:
    """A link people can click from a notice (just the path when SITE_URL is unset)."""
    return settings.SITE_URL + path


def event_payload(event: AlertEvent, transition: str) -> dict[str, Any]:
    endpoint = event.endpoint
    return {
        "state": transition,
        "event_id": event.pk,
        "rule": {"id": event.rule_id, "name": event.rule_name, "condition": event.condition_label},
        "metric": event.metric,
        "endpoint": {
            "id": endpoint.pk,
            "provider": endpoint.provider.name,
            "model_id": endpoint.model_id,
            "canonical_model": endpoint.canonical_model.name,
            "simulated": endpoint.provider.simulated,
        },
        "workload": event.workload.slug,
        "region": event.region,
        "started_at": event.started_at.isoformat(),
        "resolved_at": event.resolved_at.isoformat() if event.resolved_at else None,
        "recent_value": event.recent_value,
        "recent_samples": event.recent_samples,
        "baseline_value": event.baseline_value,
        "baseline_samples": event.baseline_samples,
        "limit_value": event.limit_value,
        "resolved_value": event.resolved_value,
        "p_value": event.p_value,
        "effect": event.effect,
        "summary": summary_line(event, transition),
        "path": reverse("alerts:event", args=[event.pk]),
        "url": site_url(reverse("alerts:event", args=[event.pk])),
        "endpoint_url": site_url(reverse("endpoint", args=[endpoint.pk])),
    }


def series_label(event: AlertEvent) -> str:
    return f"{event.endpoint} · {event.workload.slug} · {event.region}"


def summary_line(event: AlertEvent, transition: str) -> str:
    """One line per alert: what a grouped notice lists."""
    metric = event.metric
    if transition == "resolved":
        return (
            f"{series_label(event)}: {event.metric_label} back to "
            f"{format_value(metric, event.resolved_value)}"
        )
    significance = f", p={event.p_value:.2g}" if event.p_value is not None else ""
    return (
        f"{series_label(event)}: {event.metric_label} {format_value(metric, event.recent_value)}"
        f" past {format_value(metric, event.limit_value)}{significance}"
    )


def notice_message(events: list[AlertEvent], transition: str) -> Message:
    """One message for the alerts of one group (a provider) that changed together."""
    if len(events) == 1:
        return event_message(events[0], transition)
    provider = events[0].endpoint.provider.name
    word = {"resolved": "RESOLVED", "reminder": "STILL FIRING"}.get(transition, "FIRING")
    subject = f"[Inferwatch] {word}: {len(events)} alerts on {provider}"
    lines = [f"- {summary_line(event, transition)}" for event in events]
    lines.append(f"Alerts: {site_url(reverse('alerts:index'))}")
    payload = {
        "state": transition,
        "group": {"provider": provider, "count": len(events)},
        "alerts": [event_payload(event, transition) for event in events],
        "url": site_url(reverse("alerts:index")),
    }
    return Message(subject=subject, text="\n".join(lines), payload=payload)


def event_message(event: AlertEvent, transition: str) -> Message:
    metric = event.metric
    series = series_label(event)
    if transition in ("firing", "reminder"):
        word = "FIRING" if transition == "firing" else "STILL FIRING"
        subject = f"[Inferwatch] {word}: {event.rule_name} — {series}"
        lines = [
            f"{event.metric_label} is {format_value(metric, event.recent_value)} "
            f"(median of {event.recent_samples} runs), "
            f"past {format_value(metric, event.limit_value)}.",
        ]
        if event.baseline_value is not None:
            lines.append(
                f"Baseline: {format_value(metric, event.baseline_value)} "
                f"over {event.baseline_samples} runs."
            )
        if event.p_value is not None:
            lines.append(
                f"Change: {event.effect * 100:+.0f} % worse, p={event.p_value:.2g} "
                "(one-sided Mann–Whitney U)."
            )
    else:
        subject = f"[Inferwatch] RESOLVED: {event.rule_name} — {series}"
        lines = [
            f"{event.metric_label} is back to {format_value(metric, event.resolved_value)} "
            f"({event.resolution or 'recovered'}).",
            f"It fired at {event.started_at:%Y-%m-%d %H:%M} UTC with "
            f"{format_value(metric, event.recent_value)}.",
        ]
    lines += [
        f"Rule: {event.condition_label}.",
        f"Endpoint: {site_url(reverse('endpoint', args=[event.endpoint_id]))}",
        f"Alert: {site_url(reverse('alerts:event', args=[event.pk]))}",
    ]
    return Message(subject=subject, text="\n".join(lines), payload=event_payload(event, transition))
