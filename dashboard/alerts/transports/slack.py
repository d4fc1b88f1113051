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
        post_json(config["url"], {"text": f"*{message.subject}*\n{message.text}"})
