"""Validators the catalog's fields share (also referenced by migrations)."""

from __future__ import annotations

import re
from decimal import Decimal
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, URLValidator

from probes.engine import egress
from probes.platform import secrets

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_REGION = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


def validate_base_url(value: str) -> None:
    URLValidator(schemes=["http", "https"])(value)
    if value.rstrip("/") != value.rstrip("/").strip() or "?" in value or "#" in value:
        raise ValidationError("The base URL may not contain a query string or fragment.")
    if "@" in urlsplit(value).netloc:
        # A password in the URL would be shown wherever the URL is (lists, view-only
        # pages, the provider's default name): credentials go in the key or headers.
        raise ValidationError(
            "The base URL may not contain a user name or password: put the credential in "
            "the API key (or an extra header), which are stored encrypted and never shown."
        )
    validate_outbound_url(value)


def validate_outbound_url(value: str) -> None:
    """Every URL we send requests to (base URLs, metrics and power URLs, webhooks, the
    OTLP endpoint) passes the door's policy here too: an address it refuses, or a cloud
    metadata name, is refused when the row is saved (admin, YAML loader, API), with the
    reason, not only at every request. A host name is judged again by what it resolves
    to at each connection (probes/engine/door.py)."""
    refusal = egress.url_refusal(value)
    if refusal:
        raise ValidationError(f"Outbound requests may not go there: {refusal}.")


def validate_env_name(value: str) -> None:
    if value and not _ENV_NAME.match(value):
        raise ValidationError(
            "An environment variable name: capital letters, digits and underscores."
        )
    refusal = value and secrets.env_name_refusal(value)
    if refusal:
        raise ValidationError(refusal[0].upper() + refusal[1:] + ".")


def validate_region(value: str) -> None:
    if not _REGION.match(value):
        raise ValidationError("A region is lower-case letters, digits and dashes, e.g. eu-west.")


def validate_headers(value) -> None:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValidationError('Extra headers must be a JSON object of strings: {"X-Name": "v"}.')


positive = MinValueValidator(Decimal("0"))


def validate_power_selector(value: str) -> None:
    from probes.engine.energy import SelectorError, parse_selector

    try:
        parse_selector(value)
    except SelectorError as exc:
        raise ValidationError(str(exc)) from None


def validate_metrics_url(value: str) -> None:
    """A metrics URL is shown on pages and in exports: it may not carry credentials."""
    URLValidator(schemes=["http", "https"])(value)
    netloc = value.split("://", 1)[-1].split("/", 1)[0]
    if "@" in netloc:
        raise ValidationError("A metrics URL may not contain a user or password.")
    validate_outbound_url(value)
