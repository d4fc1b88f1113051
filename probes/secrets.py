"""API keys at rest: Fernet-encrypted with a key derived from FIELD_ENCRYPTION_KEY."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from probes.engine import http_errors


def _fernet() -> Fernet:
    digest = hashlib.sha256(settings.FIELD_ENCRYPTION_KEY.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str | None:
    """The plaintext, or None when the token was made with another key."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except (InvalidToken, ValueError):
        return None


def redact(text: str, secrets: list[str]) -> str:
    """Replace every known secret in `text` (error messages, logs) with a marker."""
    return http_errors.redact(text, secrets)
