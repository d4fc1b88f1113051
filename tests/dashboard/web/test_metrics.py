"""/metrics parses as Prometheus exposition and says what the pages say."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from probes.models import DispatchedSlot, Probe, ProbeRun


def scrape(client) -> dict:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    return {f.name: f for f in text_string_to_metric_families(response.content.decode())}


def sample(families, name, **labels):
    for family in families.values():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise AssertionError(f"no sample {name} {labels}")


def test_it_exports_medians_and_success_rates_per_endpoint(client, history):
    families = scrape(client)
    fast = sample(families, "inferwatch_output_tps_median", endpoint="llama-3.3-70b")
    assert fast == pytest.approx(1870, rel=0.1)
    assert sample(families, "inferwatch_success_rate", endpoint="sim-fast", simulated="true") < 1


def test_run_counters_by_status_match_the_runs(client, history):
    families = scrape(client)
    for status in ("ok", "server_error"):
        expected = ProbeRun.objects.filter(
            endpoint__model_id="llama-3.3-70b", status=status
        ).count()
        assert (
            sample(families, "inferwatch_runs_total", endpoint="llama-3.3-70b", status=status)
            == expected
        )


def test_probe_lag_shows_how_late_a_probe_is(client, history):
    now = timezone.now()
    Probe.objects.update(next_run_at=now + timedelta(minutes=1))
    Probe.objects.filter(endpoint__model_id="sim-fast").update(
        next_run_at=now - timedelta(minutes=10)
    )
    lag = sample(scrape(client), "inferwatch_probe_lag_seconds", endpoint="sim-fast")
    assert 590 < lag < 700
    assert sample(scrape(client), "inferwatch_probe_lag_seconds", endpoint="llama-3.3-70b") == 0


def test_lost_slots_are_counted_per_region_apart_from_the_providers_runs(client, history):
    probe = Probe.objects.filter(region="eu-west").first() or Probe.objects.first()
    now = timezone.now()
    for minutes, state in ((10, "lost"), (20, "lost"), (30, "done")):
        slot = now - timedelta(minutes=minutes)
        DispatchedSlot.objects.create(
            probe=probe,
            slot_at=slot,
            region=probe.region,
            queued_at=slot,
            deadline=slot,
            next_at=slot + timedelta(minutes=5),
            state=state,
            closed_at=slot,
        )

    families = scrape(client)

    assert sample(families, "inferwatch_lost_slots", region=probe.region) == 2
    # A region probes run from that lost nothing has its series too, at zero.
    Probe.objects.create(endpoint=probe.endpoint, workload=probe.workload, region="ap-south")
    assert sample(scrape(client), "inferwatch_lost_slots", region="ap-south") == 0
