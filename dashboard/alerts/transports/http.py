"""POSTing JSON to a URL, shared by the webhook-style transports.

Error messages are built here from status codes and exception class names only: httpx's
own messages contain the URL, and webhook URLs carry their tokens.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import httpx
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from dashboard.alerts.transports.base import TransportError

TIMEOUT_S = 10.0
# 408 and 429 are the receiver asking us to come back later, not a dead endpoint.
_RETRYABLE_4XX = {408, 425, 429}


def clean_url(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError('A "url" is required, e.g. {"url": "https://example.com/hook"}.')
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


def post_json(url: str, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    try:
        response = httpx.post(
            url,
            json=payload,
            headers={"User-Agent": "Inferwatch alerts", **(headers or {})},
            timeout=TIMEOUT_S,
            follow_redirects=False,
        )
    except httpx.TimeoutException as exc:
        raise TransportError(f"timed out ({type(exc).__name__})") from None
    except httpx.HTTPError as exc:
        raise TransportError(f"connection failed ({type(exc).__name__})") from None
    status = response.status_code
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        raise TransportError(f"HTTP {status}: redirects are not followed", permanent=True)
    if 400 <= status < 500 and status not in _RETRYABLE_4XX:
        raise TransportError(f"HTTP {status}: the receiver refused the notice", permanent=True)
    raise TransportError(f"HTTP {status}")
