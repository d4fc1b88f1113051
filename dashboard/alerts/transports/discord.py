"""Discord webhook with native embeds (one per alert, coloured by state)."""

from __future__ import annotations

from typing import Any

from dashboard.alerts.transports.base import Message
from dashboard.alerts.transports.http import UrlTransport, post_json

_COLOURS = {"firing": 0xD93025, "reminder": 0xE37400, "resolved": 0x188038, "test": 0x1A73E8}
# Discord's limits: 10 embeds per message, 4,096 characters per description.
_MAX_EMBEDS = 10
_MAX_DESCRIPTION = 4096


class DiscordTransport(UrlTransport):
    kind = "discord"
    label = "Discord webhook"
    example_config = {"url": "https://discord.com/api/webhooks/123/abc"}
    docs = "POSTs an embed per alert (red firing, green resolved) to a Discord webhook URL."

    @staticmethod
    def embeds(message: Message) -> list[dict[str, Any]]:
        payload = message.payload
        colour = _COLOURS.get(payload.get("state", ""), 0x5F6368)
        alerts = payload.get("alerts") or ([payload] if "event_id" in payload else [])
        embeds = [
            {
                "title": f"{a['state'].upper()}: {a['rule']['name']}"[:256],
                "description": (
                    f"{a['endpoint']['provider']} · {a['endpoint']['model_id']} · "
                    f"{a['workload']} · {a['region']}\n{a.get('summary', '')}"
                )[:_MAX_DESCRIPTION],
                "url": a.get("url") if str(a.get("url", "")).startswith("http") else None,
                "color": colour,
                "timestamp": a.get("started_at"),
            }
            for a in alerts[:_MAX_EMBEDS]
        ]
        return embeds or [
            {"title": message.subject[:256], "description": message.text[:_MAX_DESCRIPTION]}
        ]

    def send(self, config: dict[str, Any], message: Message) -> None:
        embeds = [{k: v for k, v in e.items() if v is not None} for e in self.embeds(message)]
        post_json(
            config["url"],
            {
                "content": message.subject[:2000],
                "embeds": embeds,
                "allowed_mentions": {"parse": []},
            },
        )
