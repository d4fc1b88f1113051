"""Slack-compatible incoming webhook (Slack, Mattermost, Rocket.Chat)."""

from __future__ import annotations

from typing import Any

from dashboard.alerts.transports.base import Message
from dashboard.alerts.transports.http import UrlTransport, post_json


class SlackTransport(UrlTransport):
    kind = "slack"
    label = "Slack-compatible webhook"
    example_config = {"url": "https://hooks.slack.com/services/T000/B000/XXXX"}
    docs = 'POSTs {"text": …} (Slack mrkdwn) to an incoming-webhook URL.'

    def send(self, config: dict[str, Any], message: Message) -> None:
        text = f"*{escape(message.subject)}*\n{escape(message.text)}"
        post_json(config["url"], {"text": text})


def escape(text: str) -> str:
    """Slack's three control characters: a provider or model name reads as written, never
    as a mention (<!channel>) or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
