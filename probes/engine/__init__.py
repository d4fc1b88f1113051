"""The measurement engine: plain Python, no Django (metrics as defined on /methodology/).

from probes.engine import ProbeRequest, measure_sync
result = measure_sync(ProbeRequest(api="openai-chat", base_url=URL, model=ID))
"""

from typing import TYPE_CHECKING

from .contract import METHODOLOGY_VERSION, MIN_SPEED_TOKENS, RETRYABLE_STATUSES, STATUSES
from .request import APIS, Limits, Prices, ProbeRequest
from .result import RunResult

if TYPE_CHECKING:
    from .client import measure, measure_all, measure_all_sync, measure_sync

__all__ = [
    "APIS",
    "METHODOLOGY_VERSION",
    "MIN_SPEED_TOKENS",
    "RETRYABLE_STATUSES",
    "STATUSES",
    "Limits",
    "Prices",
    "ProbeRequest",
    "RunResult",
    "measure",
    "measure_all",
    "measure_all_sync",
    "measure_sync",
]

_CLIENT = {"measure", "measure_all", "measure_all_sync", "measure_sync"}


def __getattr__(name: str):
    # The client (httpx, the tokenizer's glue) loads on first use: Django loads the
    # models, which read the contract and the dialects, for every manage.py command.
    if name in _CLIENT:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
