"""Where a request to a URL goes: its origin (scheme, host, port).

Plain string work, no HTTP client: the models, the secrets' bindings and migrations
compare origins on every load, and need not pay for httpx to do it. The door (door.py)
binds keys to these origins and re-exports ``origin``.
"""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> str:
    """``scheme://host:port`` of a URL, lower-case with the default port spelled out:
    where a request to it goes (a path change stays put). "" when it has no host."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if not host:
        return ""
    try:
        port = parts.port or DEFAULT_PORTS.get(scheme)
    except ValueError:
        port = None
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}:{port}" if port else f"{scheme}://{shown}"
