"""Typed readers for settings that come from the environment.

Each raises ImproperlyConfigured with the variable's name and what was wrong, so a bad
value stops the process with one clear line instead of being guessed at.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str, environ: Mapping[str, str] | None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get(name)


def env_str(name: str, default: str = "", environ: Mapping[str, str] | None = None) -> str:
    value = _raw(name, environ)
    return default if value is None else value


def env_secret(name: str, default: str = "", environ: Mapping[str, str] | None = None) -> str:
    """Read NAME, or the file named by NAME_FILE (Docker and Kubernetes secrets)."""
    path = _raw(f"{name}_FILE", environ)
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path!r} cannot be read: {exc}") from exc
    return env_str(name, default, environ)


def env_bool(name: str, default: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    value = _raw(name, environ)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean (use true/false, 1/0, yes/no)")


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    value = _raw(name, environ)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a whole number") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={number} is below the minimum {minimum}")
    if maximum is not None and number > maximum:
        raise ImproperlyConfigured(f"{name}={number} is above the maximum {maximum}")
    return number


def env_float(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> float:
    value = _raw(name, environ)
    if value is None or value.strip() == "":
        return default
    try:
        number = float(value.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not a number") from None
    if number != number or (minimum is not None and number < minimum):
        raise ImproperlyConfigured(f"{name}={value!r} must be a number >= {minimum}")
    return number


def env_list(
    name: str, default: list[str] | None = None, environ: Mapping[str, str] | None = None
) -> list[str]:
    value = _raw(name, environ)
    if value is None:
        return list(default or [])
    return [item.strip() for item in value.split(",") if item.strip()]


def env_secret_list(name: str, environ: Mapping[str, str] | None = None) -> list[str]:
    """A comma-separated list of secrets from NAME, or from the file named by NAME_FILE
    (one per line or comma-separated): the old keys kept for rotation."""
    text = env_secret(name, "", environ)
    return [item.strip() for item in text.replace("\n", ",").split(",") if item.strip()]


def env_ip_networks(
    name: str, environ: Mapping[str, str] | None = None
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """Comma-separated addresses or networks (`10.0.0.5`, `172.16.0.0/12`, `::1`)."""
    networks = []
    for item in env_list(name, [], environ):
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(
                f"{name}: {item!r} is not an IP address or network (e.g. 172.16.0.0/12)"
            ) from None
    return networks


def env_database_url(name: str, default: str, environ: Mapping[str, str] | None = None) -> dict:
    """Parse a postgres:// URL into Django's DATABASES entry."""
    import dj_database_url

    url = env_str(name, default, environ)
    if not url.startswith(("postgres://", "postgresql://")):
        raise ImproperlyConfigured(
            f"{name}={url!r} is not a PostgreSQL URL (expected postgresql://user@host:port/db)"
        )
    try:
        return dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} cannot be parsed: {exc}") from exc


def env_redis_url(name: str, default: str, environ: Mapping[str, str] | None = None) -> str:
    url = env_str(name, default, environ)
    if not url.startswith(("redis://", "rediss://", "redis+socket://", "unix://")):
        raise ImproperlyConfigured(
            f"{name}={url!r} is not a Redis URL (expected redis://host:port/db or "
            "redis+socket:///path/to/socket)"
        )
    return url


def url_without_password(url: str) -> str:
    """`url` with its password masked, for messages and pages."""
    from urllib.parse import urlsplit

    password = urlsplit(url).password
    return url.replace(f":{password}@", ":***@", 1) if password else url


def first_line(exc: BaseException) -> str:
    """The first non-blank line of an exception's message, for one-line errors."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else exc.__class__.__name__
