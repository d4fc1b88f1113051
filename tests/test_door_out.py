"""The one door out (probes/engine/door.py), request by request: with EGRESS_DENY=127.0.0.0/8
no request of any kind reaches a real listener on 127.0.0.1 that counts connections, and
with the default policy the same request does reach it (so each test can fail). A cloud
metadata address, spelled any way or reached through a mocked resolver, never reaches a
fake metadata service standing in for it on loopback."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import httpcore
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult

from dashboard.alerts.transports import TransportError
from dashboard.alerts.transports.http import bounded_post
from probes.engine import ProbeRequest, RunResult, bounded, door, egress, measure_sync, telemetry
from probes.engine import tokenize as tokenize_mod
from probes.engine.telemetry import Telemetry
from probes.onboarding import connection_check
from probes.platform import otel
from tests.door_listener import CountingListener

PROMETHEUS_TEXT = b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n"


@pytest.fixture
def listener() -> Iterator[CountingListener]:
    server = CountingListener(PROMETHEUS_TEXT, b"text/plain; version=0.0.4")
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def default_policy(settings) -> Iterator[None]:
    settings.EGRESS_DENY, settings.EGRESS_ALLOW = [], []
    yield
    egress.configure()


# -- each kind of request, aimed at `url` (the listener's root) ------------------------------


def _probe(url: str) -> str:
    result = measure_sync(ProbeRequest(api="openai-chat", base_url=url + "/v1", model="m"))
    return f"{result.status}: {result.error}"  # the warm-up GET and the measured POST


def _observe(tel: Telemetry) -> str:
    async def run() -> RunResult:
        return RunResult(api="openai-chat", model="m")

    result = bounded.run_sync(lambda: telemetry.observe(SimpleNamespace(telemetry=tel), run))
    return str(result.server_timing)


def _metrics(url: str) -> str:
    return _observe(Telemetry(server_metrics_url=url + "/metrics"))


def _power_dcgm(url: str) -> str:
    return _observe(Telemetry(power_url=url + "/metrics"))


def _power_prometheus(url: str) -> str:
    return _observe(Telemetry(power_url=url + "/api/v1/query", power_query="sum(energy_j)"))


def _tokenizer(url: str) -> str:
    try:
        return str(tokenize_mod.count_texts_sync("vllm", url + "/v1", "m", ["some text"]))
    except tokenize_mod.TokenizeError as exc:
        return str(exc)


def _test_connection(url: str) -> str:
    # Add an endpoint's Test connection: the streamed request, then its side requests
    # (/models, /props, /slots, /metrics) whatever the stream gave.
    report = connection_check.check(url + "/v1", "m", api_style="openai-chat")
    return report.error


def _delivery(url: str) -> str:
    try:
        return str(bounded_post(url + "/hook", b"{}", {"content-type": "application/json"}))
    except TransportError as exc:
        return exc.message


def _otlp(url: str) -> str:
    reader = InMemoryMetricReader()
    metrics = otel.RunMetrics(reader)
    metrics.record(RunResult(status="ok", e2e_ms=900.0, ttft_ms=100.0), otel.Target("p", "m", url))
    data = reader.get_metrics_data()
    outcome = otel.DoorExporter(otel.otlp_metrics_url(url)).export(data)
    metrics.provider.shutdown()
    return "exported" if outcome is MetricExportResult.SUCCESS else "failed"


KINDS: dict[str, Callable[[str], str]] = {
    "probe": _probe,
    "metrics": _metrics,
    "power-dcgm": _power_dcgm,
    "power-prometheus": _power_prometheus,
    "tokenizer": _tokenizer,
    "test-connection-and-side-requests": _test_connection,
    "delivery": _delivery,
    "otlp": _otlp,
}


@pytest.mark.parametrize("kind", KINDS)
def test_with_loopback_denied_no_request_reaches_127_0_0_1(kind, listener, settings):
    send = KINDS[kind]
    send(listener.url)
    reached = listener.connections
    assert reached >= 1, "the default policy lets it through: the listener is the witness"

    settings.EGRESS_DENY = ["127.0.0.0/8"]
    said = send(listener.url)

    assert listener.connections == reached, f"{kind} reached 127.0.0.1 through EGRESS_DENY"
    if kind in ("probe", "delivery"):
        assert "refused by EGRESS_DENY" in said or "ConnectError" in said, said
    if kind in ("metrics", "power-dcgm", "power-prometheus"):
        # Telemetry notes are in our words only (the one door in): the refusal's class.
        assert "refused by policy" in said, said
    if kind == "otlp":
        assert said == "failed"


# -- cloud metadata: a fake service on loopback stands in for 169.254.169.254 -----------------


@pytest.fixture
def fake_metadata(monkeypatch) -> Iterator[CountingListener]:
    """A metadata service on loopback: any connection to 169.254.169.254 (after the
    policy) lands on it. Names in NAMES resolve (mocked) to the metadata address; no
    other non-loopback address may be connected to at all."""
    service = CountingListener(b'{"role": "INTERNAL-SECRET"}')
    real_connect = httpcore.AnyIOBackend.connect_tcp
    real_resolve = socket.getaddrinfo

    async def connect(self, host, port, *args, **kwargs):
        if str(host).strip("[]") in STAND_INS:
            host, port = "127.0.0.1", service.server_address[1]
        if host not in ("127.0.0.1", "::1"):
            raise AssertionError(f"the test tried to connect to {host}")
        return await real_connect(self, host, port, *args, **kwargs)

    def resolve(host, port, *args, **kwargs):
        if host == "cloud-metadata.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]
        if host == "nat64-metadata.test":
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("64:ff9b::a9fe:a9fe", port))]
        return real_resolve(host, port, *args, **kwargs)

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", connect)
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    yield service
    service.stop()


METADATA_URLS = [
    "http://169.254.169.254",
    "http://[::ffff:169.254.169.254]",
    "http://[64:ff9b::a9fe:a9fe]",
    "http://2852039166",
    "http://cloud-metadata.test",
    "http://nat64-metadata.test",
    # Issue 33: the gaps of round three.
    "http://[64:ff9b:1::a9fe:a9fe]",  # local-use NAT64
    "http://[2002:a9fe:a9fe::]",  # 6to4
    "http://[::ffff:0:a9fe:a9fe]",  # SIIT's IPv4-translated form
    "http://[fd20:ce::254]",  # GCP's IPv6 metadata
    "http://192.0.0.192",  # Oracle's metadata
]
# Addresses a connection to which lands on the fake metadata service: the service itself
# and every spelling of it the policy must see through (without the policy, a NAT64 or
# 6to4 gateway, a SIIT translator would take them there).
STAND_INS = {
    "169.254.169.254",
    "64:ff9b:1::a9fe:a9fe",
    "2002:a9fe:a9fe::",
    "::ffff:0:a9fe:a9fe",
    "fd20:ce::254",
    "192.0.0.192",
}


def test_the_fake_metadata_service_is_reachable_only_when_explicitly_allowed(
    fake_metadata, settings
):
    settings.EGRESS_ALLOW = ["169.254.169.254/32"]
    assert "INTERNAL-SECRET" in _get_body("http://169.254.169.254")
    assert fake_metadata.connections == 1  # the rig works: the policy is what stops it


def _get_body(url: str) -> str:
    return door.request_sync("GET", url + "/latest", deadline_s=5, max_bytes=4096).body.decode()


@pytest.mark.parametrize("url", METADATA_URLS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_metadata_address_never_reaches_the_metadata_service(kind, url, fake_metadata):
    said = KINDS[kind](url)
    assert fake_metadata.connections == 0, f"{kind} reached the metadata service via {url}"
    assert "INTERNAL-SECRET" not in said


def test_the_door_follows_no_redirect(listener):
    # A 3xx is an answer: the door never makes a second request to where it points
    # (an internal page or the metadata service behind a public URL).
    target = CountingListener()
    redirect = CountingListener(b"")
    redirect.status_line = b"HTTP/1.1 302 Found\r\nlocation: " + target.url.encode() + b"/x"
    try:
        answer = door.request_sync("GET", redirect.url + "/", deadline_s=5, max_bytes=1024)
        assert answer.status_code == 302 and redirect.connections == 1
        assert target.connections == 0
    finally:
        target.stop()
        redirect.stop()
