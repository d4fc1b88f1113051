"""The registry of provider APIs: one Dialect per file in this package.

The API-style choices of the admin, `measure --api`, ProbeRequest validation and the
simulator's routes all read DIALECTS. Adding an API: a new file here with its recorder
and DIALECT, and one line below.
"""

from __future__ import annotations

from . import anthropic_messages, openai_chat, openai_responses
from .base import Dialect, StreamRecorder

DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        openai_chat.DIALECT,
        anthropic_messages.DIALECT,
        openai_responses.DIALECT,
    )
}
APIS: tuple[str, ...] = tuple(DIALECTS)
API_CHOICES: list[tuple[str, str]] = [(d.name, d.title) for d in DIALECTS.values()]

# The recorder classes by their usual names.
OpenAIChat = openai_chat.OpenAIChat
AnthropicMessages = anthropic_messages.AnthropicMessages
OpenAIResponses = openai_responses.OpenAIResponses


def get(api: str) -> Dialect:
    try:
        return DIALECTS[api]
    except KeyError:
        raise ValueError(f"unknown api {api!r}; expected one of {sorted(DIALECTS)}") from None


def new_recorder(api: str) -> StreamRecorder:
    return get(api).recorder()


__all__ = [
    "API_CHOICES",
    "APIS",
    "DIALECTS",
    "AnthropicMessages",
    "Dialect",
    "OpenAIChat",
    "OpenAIResponses",
    "StreamRecorder",
    "get",
    "new_recorder",
]
