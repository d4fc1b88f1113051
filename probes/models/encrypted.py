"""A JSON value stored encrypted: alert channels' settings (webhook URLs with their tokens,
HMAC secrets, routing keys, API keys) are secrets like provider keys, so they are kept as
Fernet tokens under the same keys (probes/platform/secrets.py) and rotated by `rotate_keys`.

Python code sees a dict, as with a JSONField. A token that no current or old key decrypts
loads as an empty `Undecryptable` that keeps the token: saving it writes the token back
unchanged, so a missing fallback key never destroys a stored secret.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import models

from probes.platform import secrets


class Undecryptable(dict):
    """A stored value no known key decrypts: empty, and saved back as it was."""

    def __init__(self, token: str) -> None:
        super().__init__()
        self.token = token


class EncryptedJSONField(models.TextField):
    description = "A JSON value, encrypted at rest with FIELD_ENCRYPTION_KEY"

    def from_db_value(self, value: str | None, expression, connection) -> Any:
        if value is None:
            return None
        plain = secrets.decrypt(value)
        if plain is not None:
            return json.loads(plain)
        if value.lstrip().startswith(("{", "[")):
            # Written before this column was encrypted (the migration that encrypts it
            # reads rows this way).
            return json.loads(value)
        return Undecryptable(value)

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value

    def get_prep_value(self, value: Any) -> str | None:
        if value is None:
            return None
        if isinstance(value, Undecryptable):
            return value.token
        return secrets.encrypt(json.dumps(value, separators=(",", ":")))

    def value_to_string(self, obj) -> str:
        # Serialisation (dumpdata) carries the token, never the plaintext.
        return self.get_prep_value(self.value_from_object(obj)) or ""


def encrypted_fields():
    """(model, field name) of every encrypted JSON field of every installed app."""
    from django.apps import apps

    for model in apps.get_models():
        for field in model._meta.get_fields():
            if isinstance(field, EncryptedJSONField):
                yield model, field.name
