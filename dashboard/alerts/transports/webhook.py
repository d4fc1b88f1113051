"""Generic webhook: the notice as a JSON document POSTed to a URL, signed.

With a `secret` configured, every request carries

    X-Inferwatch-Timestamp: 1764500000          (Unix seconds when it was sent)
    X-Inferwatch-Signature: sha256=<hex>        (HMAC-SHA256 with the secret)

over the bytes `<timestamp>.<body>`. A receiver recomputes the HMAC over the raw body it
got, compares with `hmac.compare_digest`, and rejects timestamps more than a few minutes
old (a replayed request keeps its old timestamp, and changing it breaks the signature).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

from django.core.exceptions import ValidationError

from dashboard.alerts.transports.base import Message, Transport
from dashboard.alerts.transports.http import clean_header, clean_url, mask_url, post_json

SIGNATURE_HEADER = "X-Inferwatch-Signature"
TIMESTAMP_HEADER = "X-Inferwatch-Timestamp"


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """What the signature header holds; receivers compute the same to verify."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signed_headers(secret: str, body: bytes, now: float | None = None) -> dict[str, str]:
    timestamp = str(int(now if now is not None else time.time()))
    return {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature(secret, timestamp, body)}


class WebhookTransport(Transport):
    kind = "webhook"
    label = "Webhook (signed JSON POST)"
    example_config = {"url": "https://example.com/hooks/inferwatch", "secret": "…", "headers": {}}
    docs = (
        "POSTs the alert as JSON. With a secret, X-Inferwatch-Signature is sha256=HMAC-SHA256"
        "(secret, timestamp + '.' + body) and X-Inferwatch-Timestamp the Unix time sent."
    )

    @classmethod
    def clean_config(cls, config: Any) -> dict[str, Any]:
        if not isinstance(config, dict):
            raise ValidationError("The configuration must be a JSON object.")
        unknown = set(config) - {"url", "headers", "secret"}
        if unknown:
            raise ValidationError(f"Unknown keys: {', '.join(sorted(unknown))}.")
        headers = config.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise ValidationError('"headers" must be a JSON object of strings.')
        headers = dict(clean_header(name, value) for name, value in headers.items())
        secret = config.get("secret") or ""
        if not isinstance(secret, str) or (secret and len(secret) < 16):
            raise ValidationError('"secret" must be a string of at least 16 characters.')
        cleaned = {"url": clean_url(config.get("url")), "headers": headers}
        return cleaned | ({"secret": secret} if secret else {})

    @classmethod
    def secret_values(cls, config: dict[str, Any]) -> list[str]:
        return [
            config.get("url", ""),
            config.get("secret", ""),
            *config.get("headers", {}).values(),
        ]

    @classmethod
    def masked_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        masked = {
            "url": mask_url(config.get("url", "")),
            "headers": {name: "…" for name in config.get("headers", {})},
        }
        return masked | ({"secret": "…"} if config.get("secret") else {})

    @classmethod
    def describe(cls, config: dict[str, Any]) -> str:
        signed = " (signed)" if config.get("secret") else ""
        return mask_url(config.get("url", "")) + signed

    def send(self, config: dict[str, Any], message: Message) -> None:
        secret = config.get("secret")
        sign = (lambda body: signed_headers(secret, body)) if secret else None
        post_json(config["url"], message.payload, config.get("headers"), sign=sign)
