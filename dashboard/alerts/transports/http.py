"""POSTing JSON to a URL, shared by the webhook-style transports.

Error messages are built here from status codes and exception class names only: httpx's
own messages contain the URL, and webhook URLs carry their tokens.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from dashboard.alerts.transports.base import Transport, TransportError
from probes.engine import egress

TOTAL_TIMEOUT_S = 10.0
MAX_RESPONSE_BYTES = 64 * 1024
# 408 and 429 are the receiver asking us to come back later, not a dead endpoint.
_RETRYABLE_4XX = {408, 425, 429}


def clean_url(value: Any, key: str = "url") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(
            f'A "{key}" is required, e.g. {{"{key}": "https://example.com/hook"}}.'
        )
    value = value.strip()
    URLValidator(schemes=["http", "https"])(value)
    return value


def mask_url(url: str) -> str:
    """Scheme and host only: the path and query of a webhook URL are usually its token."""
    parts = urlsplit(url)
    hidden = "/…" if (parts.path.strip("/") or parts.query) else ""
    return (
        f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{hidden}"
    )


class _Overrun(Exception):
    pass


def bounded_post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    total_s: float = TOTAL_TIMEOUT_S,
    max_bytes: int = MAX_RESPONSE_BYTES,
) -> tuple[int, bytes]:
    """POST and read at most `max_bytes` of the answer within `total_s` in all.

    Every outgoing alert request goes through here so that no receiver — slow, endless or
    huge — can hold a worker. (Kept to this one function so the engine's bounded-request
    helper can replace it.) Each phase is capped by httpx's timeouts, and the read by a
    deadline over the whole exchange."""
    deadline = time.monotonic() + total_s
    chunks, size = [], 0
    try:
        with (
            httpx.Client(
                timeout=httpx.Timeout(total_s),
                follow_redirects=False,
                # Every alert request passes the egress policy (probes/engine/egress.py).
                transport=egress.sync_transport(),
            ) as client,
            client.stream("POST", url, content=body, headers=headers) as response,
        ):
            for chunk in response.iter_bytes():
                size += len(chunk)
                chunks.append(chunk[: max(0, max_bytes - (size - len(chunk)))])
                if size >= max_bytes:
                    break  # enough to report on; the rest is not our business
                if time.monotonic() > deadline:
                    raise _Overrun
            return response.status_code, b"".join(chunks)
    except (_Overrun, httpx.TimeoutException) as exc:
        raise TransportError(f"timed out after {total_s:g} s ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        refused = egress.refusal_in(exc)
        if refused:  # the policy, not the network: retrying cannot help
            raise TransportError(refused, permanent=True) from None
        raise TransportError(f"connection failed ({type(exc).__name__})") from None


def post_json(
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str] | None = None,
    *,
    sign: Callable[[bytes], dict[str, str]] | None = None,
) -> bytes:
    """POST a JSON document; a 2xx returns the (bounded) answer, anything else raises
    TransportError, permanent when retrying cannot help. `sign` adds headers computed
    from the exact bytes sent (the webhook's HMAC signature)."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    status, answer = bounded_post(
        url,
        body,
        {
            "User-Agent": "Inferwatch alerts",
            "Content-Type": "application/json",
            **(headers or {}),
            **(sign(body) if sign else {}),
        },
    )
    if 200 <= status < 300:
        return answer
    if 300 <= status < 400:
        raise TransportError(f"HTTP {status}: redirects are not followed", permanent=True)
    if 400 <= status < 500 and status not in _RETRYABLE_4XX:
        raise TransportError(f"HTTP {status}: the receiver refused the notice", permanent=True)
    raise TransportError(f"HTTP {status}")


class UrlTransport(Transport):
    """A kind configured by one secret URL (chat incoming webhooks)."""

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
