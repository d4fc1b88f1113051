"""PagerDuty Events API v2: trigger on firing, resolve on resolved, one incident per alert.

The dedup key is the alert event's id, so a retried trigger never opens a second
incident and the resolve closes the right one. A grouped notice sends one event per
alert in it (PagerDuty groups incidents itself).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from dashboard.alerts.transports.base import Message, Transport
from dashboard.alerts.transports.http import clean_url, mask_url, post_json

EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"
_ACTIONS = {"firing": "trigger", "reminder": "trigger", "resolved": "resolve", "test": "trigger"}


class PagerDutyTransport(Transport):
    kind = "pagerduty"
    label = "PagerDuty (Events v2)"
    example_config = {"routing_key": "R0UT1NGKEY…", "url": EVENTS_URL}
    docs = (
        "Sends Events API v2 trigger/resolve events, dedup key inferwatch-<alert id>; "
        '"url" defaults to the US service '
        "(use https://events.eu.pagerduty.com/v2/enqueue in the EU)."
    )

    @classmethod
    def clean_config(cls, config: Any) -> dict[str, Any]:
        if not isinstance(config, dict):
            raise ValidationError("The configuration must be a JSON object.")
        unknown = set(config) - {"routing_key", "url"}
        if unknown:
            raise ValidationError(f"Unknown keys: {', '.join(sorted(unknown))}.")
        key = config.get("routing_key")
        if not isinstance(key, str) or len(key.strip()) < 20:
            raise ValidationError('"routing_key" is the integration key (32 characters).')
        return {"routing_key": key.strip(), "url": clean_url(config.get("url") or EVENTS_URL)}

    @classmethod
    def secret_values(cls, config: dict[str, Any]) -> list[str]:
        return [config.get("routing_key", "")]

    @classmethod
    def masked_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        return {"routing_key": "…", "url": mask_url(config.get("url", EVENTS_URL))}

    @classmethod
    def describe(cls, config: dict[str, Any]) -> str:
        return f"PagerDuty via {mask_url(config.get('url', EVENTS_URL))}"

    @staticmethod
    def events(routing_key: str, message: Message) -> list[dict[str, Any]]:
        payload = message.payload
        alerts = payload.get("alerts") or [payload]
        events = []
        for alert in alerts:
            state = alert.get("state", "test")
            dedup = f"inferwatch-{alert['event_id']}" if "event_id" in alert else None
            event = {"routing_key": routing_key, "event_action": _ACTIONS.get(state, "trigger")}
            if dedup:
                event["dedup_key"] = dedup
            if event["event_action"] == "trigger":
                endpoint = alert.get("endpoint", {})
                event["payload"] = {
                    "summary": (alert.get("summary") or message.subject)[:1024],
                    "source": endpoint.get("provider", "inferwatch"),
                    "severity": "warning" if state != "test" else "info",
                    "custom_details": {k: v for k, v in alert.items() if k != "alerts"},
                }
            events.append(event)
        return events

    def send(self, config: dict[str, Any], message: Message) -> None:
        for event in self.events(config["routing_key"], message):
            post_json(config["url"], event)
