"""Notification transports, one small module per kind, behind one registry.

Like healthchecks' TRANSPORTS: adding a kind means writing its module and one line here.
Everything else — the admin's kind choices, dispatch, the configuration examples and
the docs the admin shows — is read from the transport classes this registry names, so
a kind is spelled once. Dotted paths keep a transport's dependencies unloaded until used.
"""

from __future__ import annotations

from django.utils.module_loading import import_string

from dashboard.alerts.transports.base import Message, Transport, TransportError

REGISTRY: dict[str, str] = {
    "email": "dashboard.alerts.transports.email.EmailTransport",
    "webhook": "dashboard.alerts.transports.webhook.WebhookTransport",
    "slack": "dashboard.alerts.transports.slack.SlackTransport",
    "discord": "dashboard.alerts.transports.discord.DiscordTransport",
    "pagerduty": "dashboard.alerts.transports.pagerduty.PagerDutyTransport",
    "opsgenie": "dashboard.alerts.transports.opsgenie.OpsgenieTransport",
}


def get_transport(kind: str) -> type[Transport]:
    try:
        path = REGISTRY[kind]
    except KeyError:
        raise ValueError(f"unknown channel kind {kind!r}") from None
    transport = import_string(path)
    if transport.kind != kind:  # a registry typo would otherwise dispatch to the wrong kind
        raise ValueError(f"{path} is kind {transport.kind!r}, registered as {kind!r}")
    return transport


def kind_choices() -> list[tuple[str, str]]:
    """The Channel.kind choices (a callable, so migrations do not freeze the list)."""
    return [(kind, get_transport(kind).label) for kind in REGISTRY]


__all__ = [
    "REGISTRY",
    "Message",
    "Transport",
    "TransportError",
    "get_transport",
    "kind_choices",
]
