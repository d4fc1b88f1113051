"""A self-hosted endpoint's telemetry for its runs: which /metrics and power source to
read (the endpoint's fields), and the energy counter's last reading, remembered between
runs so the next run knows the power drawn meanwhile (the idle, unless others ran).

The reading is kept in Redis (per endpoint, an hour): a lost reading only leaves the
next run without its above-idle figures.
"""

from __future__ import annotations

import json
import logging

from probes.engine.result import RunResult
from probes.engine.telemetry import Telemetry
from probes.platform.redis_client import redis_client

log = logging.getLogger(__name__)

_KEY = "inferwatch:energy:last:{}"
_KEEP_S = 3600  # an older reading says nothing about this run's idle


def telemetry_for(endpoint) -> Telemetry | None:
    """What to read around the endpoint's runs; None for an endpoint without telemetry."""
    if not (endpoint.server_metrics_url or endpoint.power_url):
        return None
    return Telemetry(
        server_metrics_url=endpoint.server_metrics_url or None,
        power_url=endpoint.power_url or None,
        power_query=endpoint.power_query or None,
        power_selector=endpoint.power_selector,
        previous_energy=_last_reading(endpoint.pk) if endpoint.power_url else None,
    )


def _last_reading(endpoint_id: int) -> tuple[float, float] | None:
    try:
        raw = redis_client().get(_KEY.format(endpoint_id))
        if raw is None:
            return None
        joules, at_s = json.loads(raw)
        return float(joules), float(at_s)
    except Exception:  # Redis away or an odd value: the run goes on without idle power
        log.warning("No last energy reading for endpoint %s", endpoint_id, exc_info=True)
        return None


def remember_energy(endpoint_id: int, results: list[RunResult]) -> None:
    """Keep the latest energy reading of these runs for the endpoint's next run."""
    readings = [
        (
            r.server_timing["metrics"]["energy"]["after_j"],
            r.server_timing["metrics"]["energy"]["at_s"],
        )
        for r in results
        if (r.server_timing or {}).get("metrics", {}).get("energy")
    ]
    if not readings:
        return
    latest = max(readings, key=lambda reading: reading[1])
    try:
        redis_client().set(_KEY.format(endpoint_id), json.dumps(latest), ex=_KEEP_S)
    except Exception:
        log.warning("Could not keep the energy reading of endpoint %s", endpoint_id, exc_info=True)
