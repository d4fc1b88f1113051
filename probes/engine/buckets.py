"""Histogram bucket edges in seconds, shared by /metrics (dashboard/prom_buckets.py) and the
OpenTelemetry push (probes/platform/otel.py), so a scraped and a pushed histogram compare.

Latencies (time to first token, to first answer token, end to end) use LATENCY_EDGES:
vLLM's 22 TTFT edges (dashboards stay comparable with vLLM's own metrics) with every gap
between 20 ms and 10 s cut into equal log steps no wider than 10 % of their value.
histogram_quantile interpolates inside one bucket, so its median is then within 10 % of
the true one: vLLM's 100–250 ms bucket alone put a 106 ms median at 175 ms, wider than
the gap between a 65–95 ms claim and a GPU cloud.

Time per output token uses SECONDS_EDGES: vLLM's edges plus fast-end edges every 0.1 ms
up to 0.5 ms, then 0.75, 2 and 3 ms: the standard layouts start at 10 ms, where a
2,100 tok/s endpoint (0.48 ms per token) and a 150 tok/s one (6.7 ms) share a bucket.
"""

import math

VLLM_TTFT_EDGES = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
FAST_EDGES = (0.0001, 0.0002, 0.0003, 0.0004, 0.0005, 0.00075, 0.002, 0.003)
SECONDS_EDGES: tuple[float, ...] = tuple(sorted({*VLLM_TTFT_EDGES, *FAST_EDGES}))

# The span where claims and measurements are told apart, and the widest a bucket may be
# there, as a share of its upper edge.
FINE_FROM_S, FINE_TO_S, FINE_WIDTH = 0.02, 10.0, 0.10


def _fine_edges() -> set[float]:
    """Between each pair of vLLM edges in the fine span, n equal log steps of ratio at most
    1.1 (a width of 9.1 % of the upper edge), rounded to three significant figures so the
    `le` labels stay readable (rounding moves an edge by < 0.5 %)."""
    inner = [e for e in VLLM_TTFT_EDGES if FINE_FROM_S <= e <= FINE_TO_S]
    edges = set()
    for low, high in zip(inner, inner[1:], strict=False):
        steps = math.ceil(math.log(high / low) / math.log(1.1))
        edges.update(float(f"{low * (high / low) ** (i / steps):.3g}") for i in range(1, steps))
    return edges


LATENCY_EDGES: tuple[float, ...] = tuple(sorted({*VLLM_TTFT_EDGES, *_fine_edges()}))
