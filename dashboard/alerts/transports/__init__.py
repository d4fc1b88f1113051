"""Notification transports, one small module per kind.

Adding a kind means writing its module and one line here; the registry holds dotted
paths so a transport's dependencies are imported only when it is used.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from dashboard.alerts.transports.base import Message, Transport, TransportError

REGISTRY: dict[str, str] = {
    "email": "dashboard.alerts.transports.email.EmailTransport",
    "webhook": "dashboard.alerts.transports.webhook.WebhookTransport",
    "slack": "dashboard.alerts.transports.slack.SlackTransport",
}

KIND_CHOICES = [
    ("email", "Email"),
    ("webhook", "Webhook (JSON POST)"),
    ("slack", "Slack-compatible webhook"),
]


def get_transport(kind: str) -> type[Transport]:
    try:
        return import_string(REGISTRY[kind])
    except KeyError:
        raise ValueError(f"unknown channel kind {kind!r}") from None


__all__ = ["KIND_CHOICES", "REGISTRY", "Message", "Transport", "TransportError", "get_transport"]
