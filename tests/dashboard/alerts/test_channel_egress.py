"""Alert channels pass the egress policy: a webhook aimed at the cloud metadata address is
refused before any connection, permanently and with the reason; a receiver on loopback is
refused too under the stricter setting. No packet leaves loopback (the backend is guarded)."""

from __future__ import annotations

import httpcore
import pytest

from dashboard.alerts.transports import TransportError
from dashboard.alerts.transports.http import bounded_post


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch) -> list[str]:
    """Every address an alert request really connects to (alert transports go through the
    engine's bounded request, on httpcore's async backend); anything but loopback is
    refused here, before a socket exists, whatever the policy under test decided."""
    opened: list[str] = []
    real = httpcore.AnyIOBackend.connect_tcp

    async def guarded(self, host, port, *args, **kwargs):
        opened.append(host)
        if host not in ("127.0.0.1", "::1"):
            raise AssertionError(f"the test tried to connect to {host}")
        return await real(self, host, port, *args, **kwargs)

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", guarded)
    return opened


def test_a_webhook_at_the_metadata_address_is_refused_permanently(loopback_only):
    with pytest.raises(TransportError) as refused:
        bounded_post("http://169.254.169.254/hook", b"{}", {})
    assert refused.value.permanent
    assert "egress policy: 169.254.169.254 is link-local" in refused.value.message
    assert loopback_only == []


def test_with_the_stricter_setting_a_loopback_receiver_is_refused(
    receiver, settings, loopback_only
):
    settings.EGRESS_DENY = ["127.0.0.0/8"]
    with pytest.raises(TransportError, match="refused by EGRESS_DENY"):
        bounded_post(receiver.url, b"{}", {})
    settings.EGRESS_DENY = []
    status, _ = bounded_post(receiver.url, b"{}", {})
    assert status == 200 and loopback_only == ["127.0.0.1"]
