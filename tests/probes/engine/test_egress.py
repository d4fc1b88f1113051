"""The egress policy (probes/engine/egress.py): decisions by address, and real requests
against loopback only. No test here sends a packet to any other address: the network
backend is guarded so that a connection to anything but loopback fails the test."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator

import pytest

from probes.engine import ProbeRequest, client, door, egress, measure_sync
from probes.simulator import Profile, start_in_thread

from .test_fastread import _self_signed


@pytest.fixture(autouse=True)
def default_policy() -> Iterator[None]:
    egress.configure()
    yield
    egress.configure()


@pytest.fixture(autouse=True)
def _no_packet_leaves_loopback(loopback_only: list[str]) -> None:
    """tests/conftest.py's guard, for every test here."""


def fake_dns(monkeypatch, answers: dict[str, list[list[str]]]) -> list[str]:
    """Resolve the names in `answers` to the next address list each time they are asked
    (a rebinding resolver); other names as usual. Returns the names asked, in order."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host not in answers:
            return real(host, port, *args, **kwargs)
        asked.append(host)
        turn = answers[host][min(len(asked) - 1, len(answers[host]) - 1)]
        family = {4: socket.AF_INET, 6: socket.AF_INET6}
        return [
            (family[6 if ":" in ip else 4], socket.SOCK_STREAM, 6, "", (ip, port)) for ip in turn
        ]

    # The egress module asks socket.getaddrinfo (on a worker thread when async).
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return asked


@pytest.fixture(scope="module")
def sim():
    with start_in_thread(Profile(tps=2000, ttft_ms=5)) as handle:
        yield handle


def probe(base_url: str):
    return measure_sync(
        # No warm-up: one connection per probe, so one resolution.
        ProbeRequest(
            api="openai-chat", base_url=base_url, model="sim-fast", max_tokens=5, warm=False
        )
    )


# -- decisions -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "address",
    [
        "169.254.169.254",
        "169.254.0.1",
        "fd00:ec2::254",
        "fe80::1",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",  # NAT64's well-known prefix: the gateway forwards it there
        "::169.254.169.254",  # IPv4-compatible
    ],
)
def test_link_local_and_metadata_addresses_are_refused_by_default(address):
    assert "always refused" in egress.current().refusal(address)


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "192.168.0.9", "::1", "8.8.8.8"])
def test_loopback_private_and_public_addresses_are_allowed_by_default(address):
    assert egress.current().refusal(address) is None


def test_the_stricter_setting_refuses_loopback_and_private_ranges():
    policy = egress.configure(deny=["127.0.0.0/8", "10.0.0.0/8", "::1"])
    for address in ("127.0.0.1", "10.0.0.1", "10.255.1.2", "::1"):
        assert "EGRESS_DENY" in policy.refusal(address)
    assert policy.refusal("192.168.1.1") is None


def test_an_explicit_allow_reopens_one_address():
    policy = egress.configure(deny=["10.0.0.0/8"], allow=["10.0.0.7", "169.254.169.254"])
    assert policy.refusal("10.0.0.7") is None and policy.refusal("10.0.0.8")
    assert policy.refusal("169.254.169.254") is None


def test_a_bad_network_is_named():
    with pytest.raises(ValueError, match="'10.0.0.0/33' is not an IP address or network"):
        egress.configure(deny=["10.0.0.0/33"])


# -- real requests ----------------------------------------------------------------------------


def test_the_demo_on_loopback_still_runs(sim, loopback_only):
    result = probe(sim.base_url)
    assert result.status == "ok", result.error
    assert loopback_only == ["127.0.0.1"]


def test_a_request_to_the_metadata_address_is_refused_with_a_clear_error(loopback_only):
    result = probe("http://169.254.169.254/latest/v1")

    assert result.status == "network_error"
    assert "egress policy: 169.254.169.254 is link-local" in result.error
    assert loopback_only == []


def test_with_the_stricter_setting_loopback_is_refused(sim, loopback_only):
    egress.configure(deny=["127.0.0.0/8"])
    result = probe(sim.base_url)

    assert result.status == "network_error"
    assert "127.0.0.1 is in 127.0.0.0/8, refused by EGRESS_DENY" in result.error
    assert loopback_only == []


def test_a_hostname_resolving_to_a_refused_address_is_refused(sim, monkeypatch, loopback_only):
    fake_dns(monkeypatch, {"metadata.example": [["169.254.169.254"]]})
    result = probe(f"http://metadata.example:{sim.port}/v1")

    assert "metadata.example resolves to 169.254.169.254" in result.error
    assert loopback_only == []


def test_one_refused_address_among_several_refuses_the_host(sim, monkeypatch, loopback_only):
    fake_dns(monkeypatch, {"mixed.example": [["127.0.0.1", "169.254.169.254"]]})
    result = probe(f"http://mixed.example:{sim.port}/v1")

    assert "egress policy" in result.error and loopback_only == []


def test_the_checked_address_is_the_one_connected_to(sim, monkeypatch, loopback_only):
    """A resolver that answers loopback to the check and metadata to the next question
    (DNS rebinding) never gets its second answer used: one resolution per connection."""
    asked = fake_dns(monkeypatch, {"rebind.example": [["127.0.0.1"], ["169.254.169.254"]]})
    result = probe(f"http://rebind.example:{sim.port}/v1")

    assert result.status == "ok", result.error
    assert asked == ["rebind.example"] and loopback_only == ["127.0.0.1"]


def test_tls_keeps_the_hostname_for_sni_and_verification(tmp_path, monkeypatch, loopback_only):
    cert, key = _self_signed(tmp_path, "localhost")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    monkeypatch.setattr(client, "_ssl_context", lambda: ssl.create_default_context(cafile=cert))
    fake_dns(monkeypatch, {"localhost": [["127.0.0.1"]]})
    with start_in_thread(Profile(tps=2000, ttft_ms=5), ssl_context=server) as tls_sim:
        result = probe(f"https://localhost:{tls_sim.port}/v1")

    # The certificate names localhost only: it verifies because the name, not the
    # pinned address, went into the handshake.
    assert result.status == "ok", result.error
    assert loopback_only == ["127.0.0.1"]


def test_synchronous_side_requests_pass_the_same_policy(sim):
    egress.configure(deny=["127.0.0.0/8"])
    with pytest.raises(door.ConnectError, match="refused by EGRESS_DENY"):
        door.request_sync("GET", f"{sim.base_url}/models", deadline_s=5, max_bytes=1 << 20)
    egress.configure()
    answer = door.request_sync("GET", f"{sim.base_url}/models", deadline_s=5, max_bytes=1 << 20)
    assert answer.status_code == 200


def test_nat64_and_compatible_forms_of_a_denied_address_are_denied_too():
    egress.configure(deny=["127.0.0.0/8"])
    for address in ("64:ff9b::7f00:1", "::127.0.0.1", "::ffff:127.0.0.1"):
        assert "refused by EGRESS_DENY" in egress.current().refusal(address), address
    assert egress.current().refusal("::1") is None  # IPv6's own loopback is not 0.0.0.1
