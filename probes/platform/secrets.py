"""Provider keys: encrypted at rest, read from allowed environment variables only.

Stored keys are Fernet tokens under a key derived from FIELD_ENCRYPTION_KEY. Rotation: the
old keys stay readable through FIELD_ENCRYPTION_KEY_FALLBACKS (and SECRET_KEY with its
SECRET_KEY_FALLBACKS, since the field key defaults to SECRET_KEY), and every save
re-encrypts under the current key (`manage.py rotate_keys` does all rows at once).

`api_key_env` names a variable of the worker's own environment, which also holds
Inferwatch's secrets: only names matching PROVIDER_KEY_ENV_ALLOWED are read, and the app's
own settings are refused by name whatever that setting says. Which hosts a variable's key
may be sent to is the catalog's to say (probes/catalog/key_hosts.py): its vendors are
bound to their API hosts.
"""

from __future__ import annotations

import base64
import hashlib
from fnmatch import fnmatchcase

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from probes.engine import http_errors
from probes.engine.origins import origin

UNDECRYPTABLE = (
    "stored API key cannot be decrypted (rotated FIELD_ENCRYPTION_KEY?): add the old key "
    "to FIELD_ENCRYPTION_KEY_FALLBACKS or enter the API key again"
)

# Variables that hold Inferwatch's own secrets or wiring, never a provider's key. Every
# Django setting's name is refused too (see env_name_refusal).
_REFUSED_PATTERNS = (
    "SECRET_KEY*",
    "FIELD_ENCRYPTION_*",
    "DATABASE_*",
    "POSTGRES*",
    "PGPASS*",
    "CELERY_*",
    "REDIS_*",
    "EMAIL_*",
    "METRICS_*",
    "ADMIN_*",
    "DJANGO_*",
    "INFERWATCH_*",
    "PROVIDER_KEY_ENV_*",
    "*_FILE",  # paths of Docker/Kubernetes secrets
)


# -- encryption at rest -----------------------------------------------------------------------


def _fernet(secret: str) -> Fernet:
    digest = hashlib.sha256(secret.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def _secrets_current_first() -> list[str]:
    candidates = [
        settings.FIELD_ENCRYPTION_KEY,
        *getattr(settings, "FIELD_ENCRYPTION_KEY_FALLBACKS", []),
        # Keys stored while the field key defaulted to SECRET_KEY stay readable after a
        # separate FIELD_ENCRYPTION_KEY is set or SECRET_KEY is rotated.
        settings.SECRET_KEY,
        *getattr(settings, "SECRET_KEY_FALLBACKS", []),
    ]
    return list(dict.fromkeys(c for c in candidates if c))


def _multi() -> MultiFernet:
    # MultiFernet encrypts with the first key and decrypts with any of them.
    return MultiFernet([_fernet(s) for s in _secrets_current_first()])


def encrypt(plaintext: str) -> str:
    return _multi().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str | None:
    """The plaintext, or None when no current or old key made the token."""
    try:
        return _multi().decrypt(token.encode()).decode()
    except (InvalidToken, ValueError):
        return None


def rotate(token: str) -> str | None:
    """The token re-encrypted under the current key, or None when it cannot be decrypted."""
    try:
        return _multi().rotate(token.encode()).decode()
    except (InvalidToken, ValueError):
        return None


# -- which environment variables may hold a provider key -----------------------------------


def env_name_refusal(name: str) -> str | None:
    """Why `name` may not be read as a provider key, or None when it may."""
    own = any(fnmatchcase(name, pattern) for pattern in _REFUSED_PATTERNS)
    if own or (name.isupper() and hasattr(settings, name)):
        return (
            f"{name} is one of Inferwatch's own settings, never a provider's API key; "
            "use a variable of its own, e.g. ACME_API_KEY"
        )
    allowed = settings.PROVIDER_KEY_ENV_ALLOWED
    if not any(fnmatchcase(name, pattern) for pattern in allowed):
        return (
            f"{name} is not an allowed API key variable: PROVIDER_KEY_ENV_ALLOWED permits "
            f"{', '.join(allowed) or 'none'}"
        )
    return None


def bound_origins(name: str) -> tuple[str, ...]:
    """The full origins (scheme://host:port) `name`'s key is bound to by
    PROVIDER_KEY_ENV_HOSTS: a provider saved at one of them binds the key there, whatever
    it was bound to before. (Host bindings, the vendors' among them: catalog/key_hosts.py.)"""
    entries = settings.PROVIDER_KEY_ENV_HOSTS.get(name, ())
    return tuple(origin(entry) for entry in entries if "://" in entry)


def redact(text: str, secrets: list[str]) -> str:
    """Replace every known secret in `text` (error messages, logs) with a marker."""
    return http_errors.redact(text, secrets)
