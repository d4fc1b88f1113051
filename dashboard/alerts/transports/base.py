"""What every notification transport looks like."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


class TransportError(Exception):
    """Delivery failed. `permanent` means retrying cannot help; otherwise the delivery is
    retried. A permanent error switches the channel off when the channel is at fault
    (gone, misconfigured: `channel_fault`, the default), not when only this notice's data
    was (a character its protocol cannot carry): that notice fails, the channel stays."""

    def __init__(
        self, message: str, *, permanent: bool = False, channel_fault: bool = True
    ) -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.channel_fault = channel_fault


def unexpected_failure(exc: Exception) -> TransportError:
    """Whatever else a transport raised, as a TransportError: a network failure (OSError:
    sockets, TLS, SMTP) is retried; anything else is this notice's data that the
    transport could not send (a newline in a header, a character its encoding lacks),
    so retrying cannot help: the notice fails, recorded and shown."""
    if isinstance(exc, OSError):
        return TransportError(f"network error ({type(exc).__name__}: {exc})"[:300])
    return TransportError(
        f"the notice could not be sent as it is ({type(exc).__name__}: {exc})"[:300],
        permanent=True,
        channel_fault=False,
    )


def one_line(text: str) -> str:
    """A header value or subject: control characters and line breaks become spaces."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


@dataclass(frozen=True)
class Message:
    """One notice, rendered once and handed to any transport."""

    subject: str
    text: str
    payload: dict[str, Any] = field(default_factory=dict)


class Transport:
    """A notification channel kind. Subclasses set `kind` and `label` and implement
    `clean_config` and `send`; `secret_values` and `masked_config` keep secrets out of
    pages and logs."""

    kind: ClassVar[str]
    label: ClassVar[str]
    # Shown in the admin as the shape of the configuration.
    example_config: ClassVar[dict[str, Any]] = {}
    # One line for operators: what the receiver gets (shown in the admin).
    docs: ClassVar[str] = ""

    @classmethod
    def clean_config(cls, config: Any) -> dict[str, Any]:
        """The configuration normalised, or django ValidationError with what is wrong."""
        raise NotImplementedError

    @classmethod
    def secret_values(cls, config: dict[str, Any]) -> list[str]:
        """Strings from the configuration that must never be displayed or logged."""
        return []

    @classmethod
    def masked_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        return dict(config)

    @classmethod
    def describe(cls, config: dict[str, Any]) -> str:
        """A short, safe description of where notices go."""
        return ""

    def send(self, config: dict[str, Any], message: Message) -> None:
        """Deliver the message or raise TransportError."""
        raise NotImplementedError
