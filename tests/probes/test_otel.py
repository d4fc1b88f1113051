"""OpenTelemetry push: GenAI client metrics per request, with buckets that resolve the fast
end; off by default; received over real OTLP/HTTP by a loopback receiver."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from probes.engine.buckets import LATENCY_EDGES
from probes.engine.result import RunResult
from probes.platform import otel
from probes.slots import run as runner

TARGET = otel.Target("cerebras", "llama-3.3-70b", "https://api.cerebras.ai/v1", "chat", "eu")


def streamed(tokens_per_s: float, ttft_ms: float = 80.0, tokens: int = 300) -> RunResult:
    """An ok request that streamed one token per chunk at `tokens_per_s`."""
    return RunResult(
        status="ok",
        ttft_ms=ttft_ms,
        e2e_ms=ttft_ms + (tokens - 1) / tokens_per_s * 1000,
        output_events=tokens,
        output_tokens=tokens,
        input_tokens=1000,
    )


def points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def bucket_of(point, value: float) -> int:
    return next(i for i, edge in enumerate(point.explicit_bounds) if value <= edge)


def test_each_request_becomes_genai_client_metrics_in_seconds():
    reader = InMemoryMetricReader()
    metrics = otel.RunMetrics(reader)
    metrics.record(streamed(2100), TARGET)
    metrics.record(RunResult(status="timeout", e2e_ms=30_000.0), TARGET)

    got = points(reader)
    assert set(got) == {
        otel.DURATION,
        otel.TIME_TO_FIRST_CHUNK,
        otel.TIME_PER_OUTPUT_CHUNK,
        otel.TOKEN_USAGE,
    }
    ok, failed = sorted(got[otel.DURATION], key=lambda p: "error.type" in p.attributes)
    assert ok.attributes["gen_ai.provider.name"] == "cerebras"
    assert ok.attributes["gen_ai.request.model"] == "llama-3.3-70b"
    assert ok.attributes["server.address"] == "api.cerebras.ai"
    assert ok.attributes["server.port"] == 443
    assert failed.attributes["error.type"] == "timeout"
    assert failed.sum == pytest.approx(30.0)
    (first_chunk,) = got[otel.TIME_TO_FIRST_CHUNK]
    assert first_chunk.sum == pytest.approx(0.080)
    assert tuple(first_chunk.explicit_bounds) == LATENCY_EDGES
    usage = {p.attributes["gen_ai.token.type"]: p.sum for p in got[otel.TOKEN_USAGE]}
    assert usage == {"input": 1000, "output": 300}


def test_2100_and_150_tokens_per_second_fall_in_different_buckets():
    reader = InMemoryMetricReader()
    metrics = otel.RunMetrics(reader)
    metrics.record(streamed(2100), TARGET)
    metrics.record(streamed(150), otel.Target("slow", "m", "http://10.0.0.2:8000/v1"))
    fast, slow = sorted(points(reader)[otel.TIME_PER_OUTPUT_CHUNK], key=lambda p: p.sum / p.count)
    assert fast.sum == pytest.approx(1 / 2100)
    assert slow.attributes["server.port"] == 8000
    assert bucket_of(fast, fast.sum) != bucket_of(slow, slow.sum)
    assert fast.bucket_counts[bucket_of(fast, 1 / 2100)] == 1


def test_nothing_is_exported_unless_the_endpoint_is_set(settings):
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = ""
    otel.export(streamed(500), TARGET)
    assert otel._METRICS == {}


# -- a real OTLP/HTTP receiver on loopback ----------------------------------------------------


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, ExportMetricsServiceRequest]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def metric_names(self) -> set[str]:
        return {
            metric.name
            for _, request in self.requests
            for resource in request.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
        }


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        self.server.requests.append((self.path, request))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()
        self.wfile.write(b"")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = server.url
    yield server
    otel.shutdown()
    server.shutdown()
    server.server_close()


def test_a_loopback_receiver_gets_the_genai_metrics_over_otlp_http(receiver):
    otel.export(streamed(2100), TARGET)
    otel.flush()
    assert receiver.requests, "nothing arrived"
    assert {path for path, _ in receiver.requests} == {"/v1/metrics"}
    assert receiver.metric_names() >= {
        otel.DURATION,
        otel.TIME_TO_FIRST_CHUNK,
        otel.TIME_PER_OUTPUT_CHUNK,
        otel.TOKEN_USAGE,
    }
    _, request = receiver.requests[-1]
    metric = next(
        m
        for m in request.resource_metrics[0].scope_metrics[0].metrics
        if m.name == otel.TIME_TO_FIRST_CHUNK
    )
    (point,) = metric.histogram.data_points
    assert metric.unit == "s" and tuple(point.explicit_bounds) == LATENCY_EDGES
    attributes = {a.key: a.value.string_value for a in point.attributes}
    assert attributes["gen_ai.provider.name"] == "cerebras"


def test_the_runner_exports_every_request_it_measures(receiver, make_probe):
    probe = make_probe("sim-fast")
    runner.run_slot(probe, datetime(2026, 6, 1, tzinfo=UTC), "w1", "local")
    otel.flush()
    points = [
        point
        for _, request in receiver.requests
        for resource in request.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == otel.DURATION
        for point in metric.histogram.data_points
    ]
    assert points and points[-1].count == 1
    attributes = {a.key: a.value for a in points[-1].attributes}
    assert attributes["gen_ai.request.model"].string_value == probe.endpoint.model_id
    assert attributes["server.address"].string_value == "127.0.0.1"
