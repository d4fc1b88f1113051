"""Opsgenie Alert API: create on firing, close on resolved, one Opsgenie alert per alert.

The alias is the alert event's id, so a retried create is deduplicated by Opsgenie and the
close finds the right alert. A grouped notice sends one request per alert in it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django.core.exceptions import ValidationError

from dashboard.alerts.transports.base import Message, Transport
from dashboard.alerts.transports.http import clean_header, clean_url, mask_url, post_json

API_URL = "https://api.opsgenie.com"


class OpsgenieTransport(Transport):
    kind = "opsgenie"
    label = "Opsgenie"
    example_config = {"api_key": "…", "url": API_URL}
    docs = (
        "Creates an Opsgenie alert (alias inferwatch-<alert id>) and closes it on resolve; "
        '"url" defaults to the US API (https://api.eu.opsgenie.com in the EU).'
    )

    @classmethod
    def clean_config(cls, config: Any) -> dict[str, Any]:
        if not isinstance(config, dict):
            raise ValidationError("The configuration must be a JSON object.")
        unknown = set(config) - {"api_key", "url"}
        if unknown:
            raise ValidationError(f"Unknown keys: {', '.join(sorted(unknown))}.")
        key = config.get("api_key")
        if not isinstance(key, str) or len(key.strip()) < 20:
            raise ValidationError('"api_key" is the integration\'s API key.')
        clean_header("Authorization", f"GenieKey {key.strip()}", where="api_key")
        url = clean_url(config.get("url") or API_URL).rstrip("/")
        return {"api_key": key.strip(), "url": url}

    @classmethod
    def secret_values(cls, config: dict[str, Any]) -> list[str]:
        return [config.get("api_key", "")]

    @classmethod
    def masked_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        return {"api_key": "…", "url": mask_url(config.get("url", API_URL))}

    @classmethod
    def describe(cls, config: dict[str, Any]) -> str:
        return f"Opsgenie via {mask_url(config.get('url', API_URL))}"

    def send(self, config: dict[str, Any], message: Message) -> None:
        headers = {"Authorization": f"GenieKey {config['api_key']}"}
        base = config["url"]
        for alert in message.payload.get("alerts") or [message.payload]:
            alias = f"inferwatch-{alert['event_id']}" if "event_id" in alert else None
            if alert.get("state") == "resolved" and alias:
                url = f"{base}/v2/alerts/{quote(alias)}/close?identifierType=alias"
                post_json(url, {"source": "Inferwatch"}, headers)
                continue
            body = {
                "message": (alert.get("summary") or message.subject)[:130],
                "description": message.text[:15000],
                "source": "Inferwatch",
                "priority": "P3",
            }
            if alias:
                body["alias"] = alias
            post_json(f"{base}/v2/alerts", body, headers)
