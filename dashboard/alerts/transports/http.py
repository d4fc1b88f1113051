"""POSTing JSON to a URL, shared by the webhook-style transports.

Error messages are built here from status codes and exception class names only: httpx's
own messages contain the URL, and webhook URLs carry their tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from dashboard.alerts.transports.base import Transport, TransportError
from probes.engine import door
from probes.models.validators import validate_outbound_url

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
    validate_outbound_url(value)  # the door's policy: a metadata address never saves
    return value


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Set by the HTTP client for the bytes it sends: a configured value would break framing.
_FRAMING_HEADERS = {"host", "content-length", "transfer-encoding", "connection"}
HEADER_VALUE_MAX = 4096


def clean_header(name: Any, value: Any, where: str = "headers") -> tuple[str, str]:
    """A header name and value that can be sent as they are: a token name, a value of
    printable ASCII (no line breaks), else ValidationError saying which one is wrong.
    Checked when the channel is saved, so a delivery never fails on them."""
    if not isinstance(name, str) or not _TOKEN.fullmatch(name):
        raise ValidationError(f'"{where}": {str(name)[:40]!r} is not a valid header name.')
    if name.lower() in _FRAMING_HEADERS:
        raise ValidationError(f'"{where}": {name} is set by the HTTP client itself.')
    if (
        not isinstance(value, str)
        or len(value) > HEADER_VALUE_MAX
        or not all(32 <= ord(c) < 127 or c == "\t" for c in value)
    ):
        raise ValidationError(
            f'"{where}": the value of {name} must be printable ASCII without line breaks '
            f"(at most {HEADER_VALUE_MAX} characters)."
        )
    return name, value.strip()


def mask_url(url: str) -> str:
    """Scheme and host only: the path and query of a webhook URL are usually its token."""
    parts = urlsplit(url)
    hidden = "/…" if (parts.path.strip("/") or parts.query) else ""
    return (
        f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{hidden}"
    )


def bounded_post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    total_s: float | None = None,
    max_bytes: int = MAX_RESPONSE_BYTES,
) -> tuple[int, bytes]:
    """POST and read at most `max_bytes` of the answer within `total_s` in all.

    Every outgoing alert request goes through here, and from here through the one door
    out (probes/engine/door.py: egress policy, pinned addresses, no redirects) and its
    bounded request: one deadline over connect, headers and body, so a receiver dripping
    its header bytes is cut off like a slow body; a compressed answer is inflated only up
    to `max_bytes`. The rest of a long answer is not our business."""
    total_s = TOTAL_TIMEOUT_S if total_s is None else total_s
    try:
        response = door.request_sync(
            "POST",
            url,
            content=body,
            headers=headers,
            deadline_s=total_s,
            max_bytes=max_bytes,
            truncate=True,
        )
    except door.DeadlineExceeded:
        raise TransportError(f"timed out after {total_s:g} s") from None
    except door.BoundedError as exc:
        raise TransportError(f"unreadable answer ({type(exc).__name__})") from None
    except (door.HTTPError, door.InvalidURL) as exc:
        refused = door.refusal_in(exc)
        if refused:  # the policy, not the network: retrying cannot help
            raise TransportError(refused, permanent=True) from None
        raise TransportError(f"connection failed ({type(exc).__name__})") from None
    return response.status_code, response.body


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
