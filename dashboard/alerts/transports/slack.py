"""Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat, Discord's /slack)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError

from dashboard.alerts.transports.base import Message, Transport
from dashboard.alerts.transports.http import clean_url, mask_url, post_json


class SlackTransport(Transport):
    kind = "slack"
    label = "Slack-compatible webhook"
    example_config = {"url": "https://hooks.slack.com/services/T000/B000/XXXX"}

    @classmethod
    def clean_config(cls, config: Any) -> dict[str, Any]:
        if not isinstance(config, dict):
            raise ValidationError("The configuration must be a JSON object.")
        unknown = set(config) - {"url"}
        if unknown:
            raise ValidationError(f"Unknown keys: {', '.join(sorted(unknown))}.")
        return {"url": clean_url(config.get("url"))}

    @classmethod
    def secret_values(cls, config: dict[str, Any]) -> list[str]:
        return [config.get("url", "")]

    @classmethod
    def masked_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        return {"url": mask_url(config.get("url", ""))}

    @classmethod
    def describe(cls, config: dict[str, Any]) -> str:
        return mask_url(config.get("url", ""))

    def send(self, config: dict[str, Any], message: Message) -> None:
        post_json(config["url"], {"text": f"*{message.subject}*\n{message.text}"})
