"""The measurement engine: plain Python, no Django (metrics as defined on /methodology/).

from probes.engine import ProbeRequest, measure_sync
result = measure_sync(ProbeRequest(api="openai-chat", base_url=URL, model=ID))
"""

from .client import measure, measure_all, measure_all_sync, measure_sync
from .contract import METHODOLOGY_VERSION, MIN_SPEED_TOKENS, RETRYABLE_STATUSES, STATUSES
from .request import APIS, Limits, Prices, ProbeRequest
from .result import RunResult

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
