"""Alert channels pass the egress policy: a webhook aimed at the cloud metadata address is
refused before any connection, permanently and with the reason; a receiver on loopback is
refused too under the stricter setting. No packet leaves loopback (the backend is guarded)."""

from __future__ import annotations

import pytest

from dashboard.alerts.transports import TransportError
from dashboard.alerts.transports.http import bounded_post


@pytest.fixture(autouse=True)
def _no_packet_leaves_loopback(loopback_only: list[str]) -> None:
    """tests/conftest.py's guard, for every test here."""


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
