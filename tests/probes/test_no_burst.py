"""Schedules never burst: after downtime or an interval edit the next slot is computed
from now, and a missed slot is recorded as skipped, never run late. Real beat, real
worker, real simulator."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from probes.models import DispatchedSlot, Probe, ProbeRun
from tests.probes.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

INTERVAL_S = 12


def test_after_downtime_and_an_interval_edit_probes_run_on_cadence_not_in_a_burst(
    make_probe, processes
):
    started = datetime.now(UTC)
    # Beat was down five minutes: this probe's slot is long past.
    downtime = make_probe("sim-blazing", interval_s=INTERVAL_S)
    Probe.objects.filter(pk=downtime.pk).update(
        next_run_at=started - timedelta(minutes=5),
        last_dispatched_at=started - timedelta(minutes=5, seconds=INTERVAL_S),
    )
    # Hourly until the operator shortened it, five minutes after its last run.
    edited = make_probe("sim-blazing", interval_s=INTERVAL_S)
    Probe.objects.filter(pk=edited.pk).update(
        next_run_at=started + timedelta(minutes=55),
        last_dispatched_at=started - timedelta(minutes=5),
    )

    env = {"DISPATCH_INTERVAL_S": "1"}
    worker = processes.worker("w1", env=env)
    processes.beat(settings.CELERY_BROKER_URL, env=env)

    # Two and a half intervals: each probe runs two or three times, on cadence.
    assert wait_for(lambda: ProbeRun.objects.count() >= 4, 60), worker.output()
    wait_for(lambda: False, INTERVAL_S * 1.5)
    for probe in (downtime, edited):
        starts = sorted(ProbeRun.objects.filter(probe=probe).values_list("started_at", flat=True))
        assert 2 <= len(starts) <= 4, starts
        gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
        assert min(gaps) >= INTERVAL_S - 2, gaps  # never two runs bunched together
        slots = ProbeRun.objects.filter(probe=probe).values_list("slot_at", flat=True)
        assert min(slots) >= started  # the missed slot never ran late
        (skipped,) = DispatchedSlot.objects.filter(probe=probe, state="skipped")
        assert "not run late" in skipped.reason and skipped.slot_at < started
