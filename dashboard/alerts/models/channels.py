"""Channels: where notices go, each kind a transport from the registry."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse
from django.utils import timezone

from dashboard.alerts.models.notifications import Notification
from dashboard.alerts.notice_schema import envelope
from dashboard.alerts.transports import (
    REGISTRY,
    Message,
    TransportError,
    get_transport,
    kind_choices,
)
from dashboard.alerts.transports.base import unexpected_failure
from probes.models.encrypted import EncryptedJSONField, Undecryptable
from probes.platform.secrets import redact

UNREADABLE_SETTINGS = (
    "the channel's settings cannot be decrypted (rotated FIELD_ENCRYPTION_KEY?): add the old "
    "key to FIELD_ENCRYPTION_KEY_FALLBACKS or enter the settings again"
)


class Channel(models.Model):
    """Where notices go. `config` holds the kind's settings (webhook URLs with their
    tokens): encrypted at rest like provider keys, write-only in the admin and masked
    everywhere it is shown."""

    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=20, choices=kind_choices)
    config = EncryptedJSONField(default=dict, blank=True)
    enabled = models.BooleanField(default=True)
    last_error = models.TextField(blank=True, editable=False)
    last_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    disabled_reason = models.CharField(
        max_length=300,
        blank=True,
        editable=False,
        help_text="Set when a permanent delivery error switched the channel off.",
    )
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.get_kind_display()})"

    @property
    def transport(self):
        return get_transport(self.kind)

    def clean(self) -> None:
        if self.kind in REGISTRY:  # an unknown kind is reported by the field itself
            try:
                self.config = self.transport.clean_config(self.config)
            except ValidationError as exc:
                raise ValidationError({"config": exc.messages}) from None

    @property
    def target(self) -> str:
        """Where notices go, safe to display."""
        return self.transport.describe(self.config)

    @property
    def masked_config(self) -> dict:
        return self.transport.masked_config(self.config)

    def redact(self, text: str) -> str:
        return redact(text, self.transport.secret_values(self.config))

    def send(self, message: Message) -> None:
        """Deliver now. Whatever goes wrong comes back as a TransportError (so no notice
        stays queued for ever) with secrets removed from its message."""
        if isinstance(self.config, Undecryptable):
            raise TransportError(UNREADABLE_SETTINGS, permanent=True)
        try:
            self.transport().send(self.config, message)
        except Exception as exc:
            error = exc if isinstance(exc, TransportError) else unexpected_failure(exc)
            raise TransportError(
                self.redact(error.message),
                permanent=error.permanent,
                channel_fault=error.channel_fault,
            ) from None

    def record_error(self, error: str, *, permanent: bool) -> None:
        now = timezone.now()
        fields = {"last_error": error, "last_error_at": now}
        if permanent:
            # Like healthchecks: a gone webhook stays off until someone looks at it.
            fields |= {"enabled": False, "disabled_reason": error[:300]}
        Channel.objects.filter(pk=self.pk).update(**fields)
        for name, value in fields.items():
            setattr(self, name, value)

    def send_test(self) -> Notification:
        """Send a test notice now (the admin's "Send test notification")."""
        note = Notification.objects.create(channel=self, transition=Notification.TEST)
        note.attempt(self.test_message(), test=True)
        return note

    def test_message(self) -> Message:
        """A test notice in the shape of every notice (notice_schema.py), with no alerts:
        a receiver can check its parser against it."""
        subject = "[Inferwatch] Test notification"
        text = f"This is a test notification for the channel “{self.name}”. It works."
        url = settings.SITE_URL + reverse("alerts:index")
        payload = envelope("test", subject, text, [], None, url) | {"channel": self.name}
        return Message(subject=subject, text=text, payload=payload)
