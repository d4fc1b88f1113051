"""A hostile provider against the whole path of a slot: engine, caps, back-off, recording.

Real Postgres, real Redis (this session's DB, emptied for every test), and a raw-socket
HTTP server whose answers each test scripts (tests/probes/engine/hostile.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from decimal import Decimal

import pytest

from probes.engine import tokens
from probes.models import CanonicalModel, Endpoint, Price, Probe, Provider, Workload
from tests.probes.conftest import clean_redis  # noqa: F401 (autouse: this Redis DB, emptied)
from tests.probes.engine.hostile import HostileServer


@pytest.fixture(scope="session")
def server() -> Iterator[HostileServer]:
    tokens.encoding()  # loaded once per process, before anything is timed
    s = HostileServer()
    yield s
    s.stop()


@pytest.fixture
def probe(db, server: HostileServer) -> Probe:
    """A probe of a provider at the hostile server, with short limits."""
    server.reset()
    provider = Provider.objects.create(
        name="Hostile",
        slug="hostile",
        base_url=server.base_url,
        requires_key=False,
        enabled=True,
        connect_timeout_s=2.0,
        first_token_timeout_s=2.0,
        stall_timeout_s=1.0,
        total_timeout_s=3.0,
    )
    canonical = CanonicalModel.objects.create(slug="m", name="M")
    endpoint = Endpoint.objects.create(provider=provider, model_id="m", canonical_model=canonical)
    Price.objects.create(
        endpoint=endpoint,
        effective_from=date(2020, 1, 1),
        input_per_m=Decimal("1.0"),
        output_per_m=Decimal("2.0"),
    )
    workload = Workload.objects.create(
        slug="tiny", name="Tiny", messages=[{"role": "user", "content": "Hi."}], max_tokens=60
    )
    return Probe.objects.create(endpoint=endpoint, workload=workload, region="local")
