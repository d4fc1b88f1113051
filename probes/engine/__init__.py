"""The measurement engine: plain Python, no Django (metrics as defined on /methodology/).

from probes.engine import ProbeRequest, measure_sync
result = measure_sync(ProbeRequest(api="openai-chat", base_url=URL, model=ID))
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers and editors see; __getattr__ below at run time
    from .client import measure, measure_all, measure_all_sync, measure_sync  # noqa: F401
    from .contract import (  # noqa: F401
        METHODOLOGY_VERSION,
        MIN_SPEED_TOKENS,
        RETRYABLE_STATUSES,
        STATUSES,
    )
    from .request import APIS, Limits, Prices, ProbeRequest  # noqa: F401
    from .result import RunResult  # noqa: F401

# Each name, and the module it lives in: loaded on first use. Django loads the models,
# which read a dialect's name or the contract, for every manage.py command; the request
# (its telemetry, prometheus_client) and the client (httpx, the tokenizer's glue) load
# only where a measurement is prepared or made.
_WHERE = {
    "METHODOLOGY_VERSION": "contract",
    "MIN_SPEED_TOKENS": "contract",
    "RETRYABLE_STATUSES": "contract",
    "STATUSES": "contract",
    "APIS": "request",
    "Limits": "request",
    "Prices": "request",
    "ProbeRequest": "request",
    "RunResult": "result",
    "measure": "client",
    "measure_all": "client",
    "measure_all_sync": "client",
    "measure_sync": "client",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # once: later lookups skip this function
    return value
