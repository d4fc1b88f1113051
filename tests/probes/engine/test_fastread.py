"""The lean read path (probes/engine/fastread.py) reads httpx/httpcore internals: on the
pinned versions it must really be taken, over plain HTTP and over TLS, as every real
provider serves."""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from probes.engine import ProbeRequest, client, dialects, measure_sync
from probes.simulator import Profile, SimulatorHandle, start_in_thread


def _self_signed(directory: Path, host: str = "127.0.0.1") -> tuple[Path, Path]:
    """A certificate for `host` (an address or a DNS name), signed by its own key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    try:
        alt_name: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        alt_name = x509.DNSName(host)
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([alt_name]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> Iterator[tuple[SimulatorHandle, ssl.SSLContext]]:
    """An HTTPS simulator, and a client context that trusts its certificate only."""
    cert, key = _self_signed(tmp_path_factory.mktemp("tls"))
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    with start_in_thread(Profile(tps=500, ttft_ms=50), ssl_context=server_context) as sim:
        yield sim, ssl.create_default_context(cafile=str(cert))


@pytest.fixture
def trusting(tls, monkeypatch):
    """The engine's TLS context, trusting our test certificate (as certifi trusts a CA)."""
    sim, context = tls
    monkeypatch.setattr(client, "_ssl_context", lambda: context)
    return sim


@pytest.mark.parametrize("api", list(dialects.DIALECTS))
def test_a_tls_stream_is_read_on_the_fast_path(trusting: SimulatorHandle, api: str) -> None:
    assert trusting.base_url.startswith("https://")

    result = measure_sync(
        ProbeRequest(api=api, base_url=trusting.base_url, model="sim-fast", max_tokens=120)
    )

    assert result.status == "ok", result.error
    assert result.read_path == "transport"
    assert result.output_tokens == 120 and result.output_events == 120
    assert result.ttft_ms is not None and result.output_tps is not None
    assert result.stream["read_path"] == "transport"


def test_a_tls_fault_mid_stream_is_still_read_and_classified(trusting: SimulatorHandle) -> None:
    result = measure_sync(
        ProbeRequest(
            api="openai-chat",
            base_url=trusting.base_url,
            model="sim-fast@fault=disconnect",
            max_tokens=200,
        )
    )

    assert result.read_path == "transport"
    assert result.status == "truncated"
    assert result.output_events and result.output_events < 200


def test_a_certificate_nobody_trusts_is_refused(tls) -> None:
    sim, _ = tls
    result = measure_sync(ProbeRequest(api="openai-chat", base_url=sim.base_url, model="sim"))

    assert result.status == "network_error"
    assert "CERTIFICATE_VERIFY_FAILED" in (result.error or "")


def test_plain_http_takes_the_fast_path_too(sim: SimulatorHandle) -> None:
    result = measure_sync(ProbeRequest(api="openai-chat", base_url=sim.base_url, model="sim"))

    assert result.status == "ok"
    assert result.read_path == "transport"
