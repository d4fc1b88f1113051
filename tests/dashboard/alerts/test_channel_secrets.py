"""Alert channels' secrets are encrypted at rest with the provider keys' Fernet keys and
rotated by `rotate_keys`; a channel whose settings no key decrypts keeps them and says so."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from dashboard.alerts.models import Channel
from dashboard.alerts.models.channels import UNREADABLE_SETTINGS
from dashboard.alerts.transports import Message, TransportError
from probes.models.encrypted import Undecryptable

pytestmark = pytest.mark.django_db

HOOK = "https://hooks.example/T000/B000/very-secret-token"
HMAC = "hmac-secret-0123456789abcdef"


def raw_config(channel: Channel) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT config FROM alerts_channel WHERE id = %s", [channel.pk])
        return cursor.fetchone()[0]


def test_channel_settings_are_stored_encrypted_and_read_back_whole():
    channel = Channel.objects.create(
        name="Hook", kind="webhook", config={"url": HOOK, "secret": HMAC}
    )

    stored = raw_config(channel)
    assert "very-secret-token" not in stored and HMAC not in stored
    assert "hooks.example" not in stored
    assert Channel.objects.get(pk=channel.pk).config == {"url": HOOK, "secret": HMAC}


def test_rotate_keys_re_encrypts_channel_settings_and_names_what_it_cannot(settings):
    settings.FIELD_ENCRYPTION_KEY = "old-field-key"
    readable = Channel.objects.create(name="Hook", kind="webhook", config={"url": HOOK})
    settings.FIELD_ENCRYPTION_KEY = "lost-field-key"
    lost = Channel.objects.create(name="Lost", kind="slack", config={"url": HOOK})
    lost_token = raw_config(lost)
    settings.FIELD_ENCRYPTION_KEY = "new-field-key"
    settings.FIELD_ENCRYPTION_KEY_FALLBACKS = ["old-field-key"]

    with pytest.raises(CommandError, match=r"1 stored key\(s\) cannot be decrypted.*Lost"):
        call_command("rotate_keys")

    settings.FIELD_ENCRYPTION_KEY_FALLBACKS = []  # the old key is gone now
    assert Channel.objects.get(pk=readable.pk).config == {"url": HOOK}
    still_lost = Channel.objects.get(pk=lost.pk)
    assert isinstance(still_lost.config, Undecryptable)
    # Saved again (a rename in the admin), the token is kept for the old key to bring back.
    still_lost.name = "Lost, renamed"
    still_lost.save()
    assert raw_config(still_lost) == lost_token


def test_a_channel_whose_settings_cannot_be_decrypted_fails_permanently_and_says_why(settings):
    settings.FIELD_ENCRYPTION_KEY = "lost-field-key"
    channel = Channel.objects.create(name="Hook", kind="webhook", config={"url": HOOK})
    settings.FIELD_ENCRYPTION_KEY = "new-field-key"

    loaded = Channel.objects.get(pk=channel.pk)
    assert "hooks.example" not in loaded.target  # nothing to describe, nothing leaked
    with pytest.raises(TransportError) as failure:
        loaded.send(Message(subject="s", text="t"))
    assert failure.value.permanent and failure.value.message == UNREADABLE_SETTINGS
