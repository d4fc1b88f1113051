"""Every live secret, for the recorder's one scrub (probes/recording/recorder.py): stored keys,
environment keys, extra header values. A run must never store one, whatever field it
hides in (README, "One door in").
"""

from __future__ import annotations

import logging
import os
import threading
import time
from fnmatch import fnmatchcase

from django.conf import settings

from probes.models import Provider
from probes.platform import secrets

log = logging.getLogger(__name__)

# Shorter values (an extra header "1", "json") are not secrets, and replacing them in
# every stored string would only garble runs.
SECRET_MIN_CHARS = 6
LIVE_SECRETS_TTL_S = 60.0
_live: tuple[float, tuple[str, ...]] = (0.0, ())
_live_lock = threading.Lock()


def _env_secrets() -> set[str]:
    """Values of every environment variable a provider key may be read from."""
    allowed = settings.PROVIDER_KEY_ENV_ALLOWED
    return {
        value
        for name, value in os.environ.items()
        if any(fnmatchcase(name, pattern) for pattern in allowed)
        and not secrets.env_name_refusal(name)
    }


def _stored_secrets() -> set[str]:
    """Every provider's usable key (environment or stored) and extra header values."""
    found: set[str] = set()
    for provider in Provider.objects.only("api_key_env", "api_key_encrypted", "extra_headers"):
        key = provider.resolve_key().value
        if key:
            found.add(key)
        if provider.api_key_encrypted:
            found.add(secrets.decrypt(provider.api_key_encrypted) or "")
        found.update(str(v) for v in (provider.extra_headers or {}).values())
    return found


def live_secrets(refresh: bool = False) -> tuple[str, ...]:
    """Every secret a run must never store: stored keys, environment keys, extra header
    values. Read at most once a minute (the recorder must not need the database: when it
    is away, the last list stands, with the environment's keys read again)."""
    global _live
    expires, known = _live
    if not refresh and time.monotonic() < expires:
        return known
    with _live_lock:
        try:
            found = _stored_secrets()
        except Exception as exc:  # the database away: keep what was known
            log.warning("Could not read the providers' secrets (%s); using the last list", exc)
            found = set(known)
        found |= _env_secrets()
        known = tuple(sorted(s for s in found if len(s) >= SECRET_MIN_CHARS))
        _live = (time.monotonic() + LIVE_SECRETS_TTL_S, known)
    return known
