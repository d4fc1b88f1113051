"""Generic webhook: the notice as a JSON document POSTed to a URL."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from dashboard.alerts.transports.base import Message, Transport
from dashboard.alerts.transports.http import clean_url, mask_url, post_json


class WebhookTransport(Transport):
    kind = "webhook"
    label = "Webhook (JSON POST)"
    example_config = {"url": "https://example.com/hooks/inferwatch", "headers": {}}

    @classmethod
    def clean_config(cls, config: Any) -> dict[str, Any]:
        if not isinstance(config, dict):
            raise ValidationError("The configuration must be a JSON object.")
        unknown = set(config) - {"url", "headers"}
        if unknown:
            raise ValidationError(f"Unknown keys: {', '.join(sorted(unknown))}.")
        headers = config.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise ValidationError('"headers" must be a JSON object of strings.')
        return {"url": clean_url(config.get("url")), "headers": headers}

    @classmethod
    def secret_values(cls, config: dict[str, Any]) -> list[str]:
        return [config.get("url", ""), *config.get("headers", {}).values()]

    @classmethod
    def masked_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": mask_url(config.get("url", "")),
            "headers": {name: "…" for name in config.get("headers", {})},
        }

    @classmethod
    def describe(cls, config: dict[str, Any]) -> str:
        return mask_url(config.get("url", ""))

    def send(self, config: dict[str, Any], message: Message) -> None:
        post_json(config["url"], message.payload, config.get("headers"))
