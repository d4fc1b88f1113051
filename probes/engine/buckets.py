"""Histogram bucket edges in seconds, shared by /metrics (dashboard/prom_buckets.py) and the
OpenTelemetry push (probes/platform/otel.py), so a scraped and a pushed histogram compare.

vLLM's 22 TTFT edges (dashboards stay comparable with vLLM's own metrics) plus fast-end
edges every 0.1 ms up to 0.5 ms, then 0.75, 2 and 3 ms: the standard layouts start at
10 ms, where a 2,100 tok/s endpoint (0.48 ms per token) and a 150 tok/s one (6.7 ms) share
a bucket.
"""

VLLM_TTFT_EDGES = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
    1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
FAST_EDGES = (0.0001, 0.0002, 0.0003, 0.0004, 0.0005, 0.00075, 0.002, 0.003)
SECONDS_EDGES: tuple[float, ...] = tuple(sorted({*VLLM_TTFT_EDGES, *FAST_EDGES}))
