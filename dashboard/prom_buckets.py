"""Prometheus histogram buckets (seconds) derived from the rollups' finer histograms.

Rollups keep every metric in log-spaced buckets 0.46 % wide (dashboard/histogram.py);
Prometheus wants a few fixed `le` edges, the same for every series so that
`sum by (le)` merges them. Each stored bucket is summed into the first Prometheus bucket
whose edge is at or above everything the stored bucket can hold, so `le=e` never counts a
sample above e. A stored bucket that straddles an edge counts in the bucket above it: a
sample less than 0.46 % below an edge may read one bucket high, never low.

Edges: probes/engine/buckets.py, the same as the OpenTelemetry push: the three latencies
(TTFT, time to first answer token, end to end) in LATENCY_EDGES, no wider than 10 % from
20 ms to 10 s, so histogram_quantile lands within 10 % of the app's own percentile; time per
output token in SECONDS_EDGES (vLLM's plus fast-end ones). The latencies are the direct
metrics and time per token the one inverse metric, so `inverse` picks the edges.

Time per output token is 1 / output speed: a stored speed bucket [a, b) tok/s holds
times per token in (1/b, 1/a] s, read against the edges with 1/a as its upper bound.
"""

from __future__ import annotations

import bisect
import math

from dashboard.histogram import _FLOOR_LOG, _LOG_STEP, GAMMA
from probes.engine.buckets import LATENCY_EDGES, SECONDS_EDGES

# inverse → `le` edges: the latencies are direct, time per output token is inverse.
EDGES: dict[bool, tuple[float, ...]] = {False: LATENCY_EDGES, True: SECONDS_EDGES}
# inverse → index of the +Inf bucket in a list of per-bucket counts (len(edges) + 1 of them).
INF: dict[bool, int] = {inverse: len(edges) for inverse, edges in EDGES.items()}

# Exported histogram → (rollup metric, whether it is the inverse of that metric).
# The rollup metrics are in milliseconds, except output speed in tokens per second.
HISTOGRAMS: dict[str, tuple[str, bool]] = {
    "time_to_first_token": ("ttft_ms", False),
    "time_to_first_answer_token": ("ttfat_ms", False),
    "request_duration": ("e2e_ms", False),
    "time_per_output_token": ("output_tps", True),
}


def edges_of(histogram: str) -> tuple[float, ...]:
    return EDGES[HISTOGRAMS[histogram][1]]


def size_of(histogram: str) -> int:
    """How many per-bucket counts an exported histogram has (its edges and +Inf)."""
    return INF[HISTOGRAMS[histogram][1]] + 1


def _snap(x: float) -> float:
    """Undo float noise where an edge lies exactly on a stored bucket boundary."""
    return float(round(x)) if abs(x - round(x)) < 1e-6 else x


def _ms_cuts() -> list[int]:
    """cut[k] = the first stored index of a millisecond metric whose bucket may hold a
    value above edges[k]: stored bucket i (upper bound L·γ^(i+1) ms) belongs to
    Prometheus bucket #{k : i ≥ cut[k]}."""
    edges = EDGES[False]
    return [math.floor(_snap((math.log10(e * 1000) - _FLOOR_LOG) / _LOG_STEP)) for e in edges]


def _inverse_cuts() -> list[int]:
    """cut[k] = the first stored speed index whose every value has 1/speed ≤ edges[k]
    (lower bound L·γ^i ≥ 1/edges[k]); stored bucket i belongs to Prometheus bucket
    len(edges) − #{k : i ≥ cut[k]}. Ascending, as bisect and SQL width_bucket need."""
    edges = EDGES[True]
    return sorted(math.ceil(_snap((-math.log10(e) - _FLOOR_LOG) / _LOG_STEP)) for e in edges)


CUTS: dict[bool, list[int]] = {False: _ms_cuts(), True: _inverse_cuts()}


def prom_index(stored: int, inverse: bool) -> int:
    """The Prometheus bucket (0 … INF) a stored bucket index sums into."""
    below = bisect.bisect_right(CUTS[inverse], stored)
    if inverse:
        # Stored bucket 0 holds speeds ≤ 0.01 tok/s (and 0): as slow as it gets.
        return INF[True] if stored <= 0 else INF[True] - below
    return below


def stored_value_seconds(stored: int, inverse: bool) -> float:
    """The value a stored bucket reads as (DDSketch's, dashboard/histogram.py), in
    seconds: what _sum adds per sample, so rollups and raw runs add the same."""
    upper = 10 ** (_FLOOR_LOG + (stored + 1) * _LOG_STEP)
    value = 2 * upper / (GAMMA + 1)
    return 1 / value if inverse else value / 1000


def edge_label(edge: float) -> str:
    """`le` as Prometheus' own clients write it (repr of the float: 0.0001, 1.0, 2560.0)."""
    return repr(float(edge))
