"""Which hosts a provider key variable may be sent to.

A variable is bound to the hosts its key belongs to: the catalog's vendors are bound to
their API hosts (the seeds say which variable each reads), PROVIDER_KEY_ENV_HOSTS binds
others, and only a superuser may pair a variable with a host it is not bound to, so staff
who may add or change providers cannot send the operator's OpenAI key to a server of
their own. It lives beside the seeds it reads (not in probes/platform/secrets.py, which
sits below the catalog) so the import runs down.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from functools import cache
from urllib.parse import urlsplit

from django.conf import settings

from probes.catalog.seeds import PROVIDERS
from probes.engine.origins import origin
from probes.platform import secrets


@cache
def _vendor_bindings() -> dict[str, tuple[str, ...]]:
    bound: dict[str, tuple[str, ...]] = {}
    for seed in PROVIDERS:
        host = urlsplit(seed.base_url).hostname
        if seed.api_key_env and host:
            bound[seed.api_key_env] = (*bound.get(seed.api_key_env, ()), host)
    return bound


def bound_hosts(name: str) -> tuple[str, ...]:
    """Host patterns `name`'s key may be sent to: the catalog vendor's API host, plus
    PROVIDER_KEY_ENV_HOSTS."""
    configured = settings.PROVIDER_KEY_ENV_HOSTS.get(name, ())
    return (*_vendor_bindings().get(name, ()), *configured)


def env_host_refusal(name: str, base_url: str) -> str | None:
    """Why the key in variable `name` may not be sent to `base_url` by anyone but a
    superuser, or None. An origin entry admits exactly that origin (http too: the
    operator named it); a host entry admits the https origins on that host (the key is
    then bound to the provider's origin when it is saved), never http: a key sent there
    travels in cleartext. Every path that pairs a variable with a URL (the provider form
    when adding, renaming or changing, Add an endpoint, the catalog file) asks this."""
    if origin(base_url) in secrets.bound_origins(name):
        return None
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    hosts = bound_hosts(name)
    patterns = [pattern.lower() for pattern in hosts if "://" not in pattern]
    if host and any(fnmatchcase(host, pattern) for pattern in patterns):
        if parts.scheme.lower() == "https":
            return None
        return (
            f"{name} would go to {origin(base_url)} in cleartext: a bound host admits https "
            "only, and only a superuser may bind a key to an http:// URL (or name that "
            "origin in PROVIDER_KEY_ENV_HOSTS)"
        )
    where = ", ".join(hosts) if hosts else "no host"
    return (
        f"{name} is bound to {where}, not {host or 'this URL'}: only a superuser may send "
        "it elsewhere (or bind it in PROVIDER_KEY_ENV_HOSTS)"
    )
