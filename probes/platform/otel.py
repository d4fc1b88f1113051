"""OpenTelemetry push: each measured request, as OTel's GenAI client metrics, over OTLP/HTTP.

For operators who push instead of scrape. Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set
(e.g. http://collector:4318; `/v1/metrics` is appended as the OTLP/HTTP spec says). Each
worker process exports its own cumulative series (service.instance.id tells them apart)
every OTEL_METRIC_EXPORT_INTERVAL ms (the SDK's variable, default 60 s).

Names and attributes follow the GenAI semantic conventions:
gen_ai.client.operation.duration, gen_ai.client.operation.time_to_first_chunk,
gen_ai.client.operation.time_per_output_chunk (seconds) and gen_ai.client.token.usage
(tokens, by gen_ai.token.type), with gen_ai.operation.name, gen_ai.provider.name,
gen_ai.request.model, server.address, server.port and error.type on failures. The time
histograms use /metrics' edges (probes/engine/buckets.py): LATENCY_EDGES for duration and
first chunk (no wider than 10 % from 20 ms to 10 s), SECONDS_EDGES per output chunk, which
resolve 0.1 ms where the conventions' advised buckets start at 10 ms. Exporting never
fails a run: errors are logged and dropped.

The push goes through the one door out (probes/engine/door.py) like every other request:
the SDK's own OTLP/HTTP exporter posts with `requests`, around the egress policy, so
`DoorExporter` encodes with the OTLP protobuf encoder and posts through our client.
"""

from __future__ import annotations

import logging
import os
import platform
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
from opentelemetry.sdk.resources import Resource

from probes.engine import door
from probes.engine.buckets import LATENCY_EDGES, SECONDS_EDGES
from probes.engine.result import RunResult

log = logging.getLogger(__name__)

DURATION = "gen_ai.client.operation.duration"
TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
TIME_PER_OUTPUT_CHUNK = "gen_ai.client.operation.time_per_output_chunk"
TOKEN_USAGE = "gen_ai.client.token.usage"
# The conventions' advised token buckets (powers of 4).
TOKEN_EDGES = tuple(float(4**i) for i in range(14))


@dataclass(frozen=True)
class Target:
    """Who a run measured, as GenAI attributes name it."""

    provider: str  # gen_ai.provider.name: our provider slug
    model: str  # gen_ai.request.model: the model id the request sent
    base_url: str  # server.address and server.port come from it
    workload: str = ""
    region: str = ""

    def attributes(self) -> dict[str, str | int]:
        url = urlsplit(self.base_url)
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self.provider,
            "gen_ai.request.model": self.model,
            "server.address": url.hostname or "",
            "inferwatch.workload": self.workload,
            "inferwatch.region": self.region,
        }
        if url.port or url.scheme:
            attributes["server.port"] = url.port or (443 if url.scheme == "https" else 80)
        return attributes


class RunMetrics:
    """The four GenAI instruments on a meter provider that reads into `reader`."""

    def __init__(self, reader: MetricReader) -> None:
        histogram = ExplicitBucketHistogramAggregation
        self.provider = MeterProvider(
            metric_readers=[reader],
            resource=Resource.create(
                {
                    "service.name": "inferwatch-worker",
                    "service.instance.id": f"{platform.node()}-{os.getpid()}",
                }
            ),
            views=[
                *(
                    View(instrument_name=name, aggregation=histogram(LATENCY_EDGES))
                    for name in (DURATION, TIME_TO_FIRST_CHUNK)
                ),
                View(instrument_name=TIME_PER_OUTPUT_CHUNK, aggregation=histogram(SECONDS_EDGES)),
                View(instrument_name=TOKEN_USAGE, aggregation=histogram(TOKEN_EDGES)),
            ],
            shutdown_on_exit=True,
        )
        meter = self.provider.get_meter("inferwatch")
        self.duration = meter.create_histogram(
            DURATION, unit="s", description="Request to last byte of the response."
        )
        self.first_chunk = meter.create_histogram(
            TIME_TO_FIRST_CHUNK, unit="s", description="Request to the first output chunk."
        )
        self.per_chunk = meter.create_histogram(
            TIME_PER_OUTPUT_CHUNK,
            unit="s",
            description="Mean time between output chunks after the first, per request.",
        )
        self.tokens = meter.create_histogram(
            TOKEN_USAGE, unit="{token}", description="Input and output tokens per request."
        )

    def record(self, result: RunResult, target: Target) -> None:
        attributes = target.attributes()
        if result.status != "ok":
            attributes["error.type"] = result.status
        if result.e2e_ms is not None:
            self.duration.record(result.e2e_ms / 1000, attributes)
        if result.status != "ok":
            return  # a failed request has a duration, not chunk timings or usage
        if result.ttft_ms is not None:
            self.first_chunk.record(result.ttft_ms / 1000, attributes)
        per_chunk = time_per_output_chunk_s(result)
        if per_chunk is not None:
            self.per_chunk.record(per_chunk, attributes)
        for kind, count in (("input", result.input_tokens), ("output", result.output_tokens)):
            if count is not None:
                self.tokens.record(count, {**attributes, "gen_ai.token.type": kind})


def time_per_output_chunk_s(result: RunResult) -> float | None:
    """The mean gap between output chunks after the first: (e2e − TTFT) / (chunks − 1)."""
    chunks = result.output_events
    if not chunks or chunks < 2 or result.e2e_ms is None or result.ttft_ms is None:
        return None
    return max(0.0, result.e2e_ms - result.ttft_ms) / (chunks - 1) / 1000


# -- the process's exporter, created on first use (after a worker forks) --------------------

_LOCK = threading.Lock()
_METRICS: dict[str, RunMetrics] = {}  # endpoint URL → the process's exporter


def otlp_metrics_url(endpoint: str) -> str:
    return endpoint.rstrip("/") + "/v1/metrics"


EXPORT_DEADLINE_S = 10.0  # the SDK exporter's default timeout
EXPORT_MAX_ANSWER_BYTES = 64 * 1024  # a collector's answer is a small (partial-success) proto


class DoorExporter(MetricExporter):
    """OTLP/HTTP protobuf, posted through the one door out (cumulative temporality, the
    SDK exporter's default). A refused or failed post is a FAILURE the reader logs."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self.url = url

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs
    ) -> MetricExportResult:
        from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics

        body = encode_metrics(metrics_data).SerializeToString()
        try:
            response = door.request_sync(
                "POST",
                self.url,
                content=body,
                headers={"content-type": "application/x-protobuf"},
                deadline_s=min(EXPORT_DEADLINE_S, timeout_millis / 1000),
                max_bytes=EXPORT_MAX_ANSWER_BYTES,
                truncate=True,
            )
        except (door.HTTPError, door.BoundedError) as exc:
            log.warning(
                "OpenTelemetry export failed: %s", door.refusal_in(exc) or type(exc).__name__
            )
            return MetricExportResult.FAILURE
        if not 200 <= response.status_code < 300:
            log.warning("OpenTelemetry export failed: HTTP %s", response.status_code)
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True  # nothing is buffered here: each export posts at once

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        pass


def _metrics_for(endpoint: str) -> RunMetrics:
    with _LOCK:
        if endpoint not in _METRICS:
            exporter = DoorExporter(otlp_metrics_url(endpoint))
            _METRICS[endpoint] = RunMetrics(PeriodicExportingMetricReader(exporter))
        return _METRICS[endpoint]


def export(result: RunResult, target: Target) -> None:
    """Push one request's metrics, if OTEL_EXPORTER_OTLP_ENDPOINT is set."""
    endpoint = settings.OTEL_EXPORTER_OTLP_ENDPOINT
    if not endpoint:
        return
    try:
        _metrics_for(endpoint).record(result, target)
    except Exception:  # telemetry must never cost a run
        log.exception("OpenTelemetry export of a run failed; the run is recorded anyway")


def flush(timeout_ms: int = 10_000) -> None:
    """Export what is pending now (tests; a worker exports periodically)."""
    with _LOCK:
        exporters = list(_METRICS.values())
    for metrics in exporters:
        metrics.provider.force_flush(timeout_ms)


def shutdown() -> None:
    with _LOCK:
        exporters = list(_METRICS.values())
        _METRICS.clear()
    for metrics in exporters:
        metrics.provider.shutdown()
