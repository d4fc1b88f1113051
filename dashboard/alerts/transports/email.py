"""Email through Django's configured backend (SMTP settings come from the environment)."""

from __future__ import annotations

import smtplib
from typing import Any

from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email

from dashboard.alerts.transports.base import Message, Transport, TransportError, one_line


class EmailTransport(Transport):
    kind = "email"
    label = "Email"
    example_config = {"to": ["oncall@example.com"]}

    @classmethod
    def clean_config(cls, config: Any) -> dict[str, Any]:
        if not isinstance(config, dict):
            raise ValidationError("The configuration must be a JSON object.")
        unknown = set(config) - {"to"}
        if unknown:
            raise ValidationError(f"Unknown keys: {', '.join(sorted(unknown))}.")
        to = config.get("to")
        if isinstance(to, str):
            to = [part for part in to.replace(";", ",").split(",")]
        if not isinstance(to, list) or not all(isinstance(a, str) for a in to):
            raise ValidationError('"to" must be a list of email addresses.')
        to = [a.strip() for a in to if a.strip()]
        if not to:
            raise ValidationError('"to" needs at least one email address.')
        for address in to:
            try:
                validate_email(address)
            except ValidationError:
                raise ValidationError(f"{address!r} is not an email address.") from None
        return {"to": to}

    @classmethod
    def describe(cls, config: dict[str, Any]) -> str:
        return ", ".join(config.get("to", []))

    def send(self, config: dict[str, Any], message: Message) -> None:
        try:
            # A subject is one header line: a newline in a model id must not end it.
            subject = one_line(message.subject)[:250]
            send_mail(subject, message.text, None, config["to"], fail_silently=False)
        except smtplib.SMTPRecipientsRefused:
            raise TransportError("every recipient was refused", permanent=True) from None
        except (smtplib.SMTPException, OSError) as exc:
            raise TransportError(f"mail server error ({type(exc).__name__})") from None
