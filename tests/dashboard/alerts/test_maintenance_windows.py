"""Recurring maintenance windows: when they are on, alerts held during them (through a
real worker), probes paused by them, and probes.yaml declaring them."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from dashboard.alerts.models import AlertEvent
from dashboard.alerts.tasks import evaluate_alert_rules
from probes.catalog.yaml_file import CatalogFileError, load_text
from probes.models import DispatchedSlot, MaintenanceWindow, Probe, ProbeRun
from probes.scheduling import maintenance
from probes.tasks import run_probe
from tests.dashboard.alerts.conftest import wait_for


def window(**fields) -> MaintenanceWindow:
    values = {"name": "nightly", "start": time(23, 0), "duration": timedelta(hours=1)}
    return MaintenanceWindow(**(values | fields))


def test_a_window_recurs_on_its_days_in_its_time_zone():
    nightly = window(time_zone="Europe/Amsterdam", days=["monday", "thursday"])
    # Monday 1 December 2025, 23:00 in Amsterdam is 22:00 UTC.
    start = datetime(2025, 12, 1, tzinfo=UTC)
    spans = nightly.occurrences(start, start + timedelta(days=7))
    assert spans == [
        (datetime(2025, 12, 1, 22, tzinfo=UTC), datetime(2025, 12, 1, 23, tzinfo=UTC)),
        (datetime(2025, 12, 4, 22, tzinfo=UTC), datetime(2025, 12, 4, 23, tzinfo=UTC)),
    ]
    assert nightly.active_at(datetime(2025, 12, 1, 22, 30, tzinfo=UTC))
    assert not nightly.active_at(datetime(2025, 12, 2, 22, 30, tzinfo=UTC))  # a Tuesday


def test_a_window_that_crosses_midnight_and_a_clock_change_keeps_its_length():
    late = window(start=time(1, 30), duration=timedelta(hours=2), time_zone="Europe/Paris")
    # 26 October 2025, 01:30 in Paris is 23:30 UTC on the 25th; the clocks go back an
    # hour at 03:00 local (01:00 UTC), inside the window: it still lasts two hours.
    (span,) = late.occurrences(
        datetime(2025, 10, 25, 20, tzinfo=UTC), datetime(2025, 10, 26, 3, tzinfo=UTC)
    )
    assert span == (
        datetime(2025, 10, 25, 23, 30, tzinfo=UTC),
        datetime(2025, 10, 26, 1, 30, tzinfo=UTC),
    )
    assert late.active_at(datetime(2025, 10, 26, 0, 45, tzinfo=UTC))  # after midnight UTC
    assert not late.active_at(datetime(2025, 10, 26, 1, 30, tzinfo=UTC))  # [from, to)


def test_a_window_names_one_scope_and_a_real_time_zone(endpoint):
    with pytest.raises(ValidationError, match="provider or an endpoint"):
        window(provider=endpoint.provider, endpoint=endpoint).full_clean()
    with pytest.raises(ValidationError, match="Unknown time zone"):
        window(endpoint=endpoint, time_zone="Mars/Olympus").full_clean()
    with pytest.raises(ValidationError, match="Unknown day"):
        window(endpoint=endpoint, days=["funday"]).full_clean()


def test_a_provider_window_covers_its_endpoints(endpoint, other_endpoint):
    now = timezone.now()
    active = window(
        provider=endpoint.provider, start=(now - timedelta(minutes=5)).time(), time_zone="UTC"
    )
    active.save()
    assert maintenance.window_at(endpoint, now) == active
    assert maintenance.window_at(other_endpoint, now) is None  # another provider
    assert maintenance.window_at(endpoint, now, pausing=True) is None  # probes keep running


def test_a_pausing_window_skips_the_slot_and_says_why(endpoint, workload):
    now = timezone.now().replace(microsecond=0)
    window(endpoint=endpoint, start=(now - timedelta(minutes=5)).time(), pause_probes=True).save()
    probe = Probe.objects.create(endpoint=endpoint, workload=workload, region="local")
    DispatchedSlot.objects.create(
        probe=probe,
        slot_at=now,
        region="local",
        queued_at=now,
        deadline=now + timedelta(minutes=5),
        next_at=now + timedelta(minutes=1),
    )
    assert run_probe.apply(args=(probe.pk, now.isoformat())).get() is None
    slot = DispatchedSlot.objects.get()
    assert slot.state == "skipped" and "maintenance window 'nightly'" in slot.reason
    assert not ProbeRun.objects.filter(probe=probe).exists()


# -- probes.yaml -------------------------------------------------------------------------------

YAML = """
providers:
  - name: Own vLLM
    base_url: http://10.0.0.5:8000/v1
    requires_key: false
    endpoints:
      - model_id: llama-70b
        model: Llama 70B
maintenance_windows:
  - name: nightly-restart
    provider: own-vllm
    endpoint: llama-70b
    start: "23:00"
    duration: 1h30m
    timezone: Europe/Amsterdam
    every: [Monday, Thursday]
    pause_probes: true
"""


def test_probes_yaml_declares_windows_in_gatus_shape(db):
    load_text(YAML)
    load_text(YAML)  # idempotent
    (row,) = MaintenanceWindow.objects.all()
    assert row.endpoint.model_id == "llama-70b" and row.provider is None
    assert (row.start, row.duration) == (time(23, 0), timedelta(minutes=90))
    assert row.days == ["monday", "thursday"] and row.pause_probes
    assert row.time_zone == "Europe/Amsterdam"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("duration: 1h30m", "duration: soon"), "duration 'soon'"),
        (("timezone: Europe/Amsterdam", "timezone: Mars/Olympus"), "Unknown time zone"),
        (("every: [Monday, Thursday]", "every: [Funday]"), "Unknown day"),
        (("    endpoint: llama-70b", "    endpoint: nope"), "no endpoint 'nope'"),
        (("    pause_probes: true", "    paws: true"), "unknown field 'paws'"),
    ],
)
def test_a_bad_window_in_probes_yaml_is_refused_with_its_line(db, change, message):
    with pytest.raises(CatalogFileError, match=message) as error:
        load_text(YAML.replace(*change))
    assert error.value.line is not None
    assert not MaintenanceWindow.objects.exists()  # all or nothing


# -- alerts held, through a real worker --------------------------------------------------------


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_window_holds_an_alert_that_would_otherwise_fire(
    celery_worker_process, runs_until, make_rule, webhook, receiver, endpoint
):
    proc, log_path = celery_worker_process
    now = timezone.now()
    runs = runs_until(now)
    runs.add(20, minutes_ago=120, ttft_ms=200.0)
    runs.add(6, minutes_ago=5, ttft_ms=700.0)
    make_rule(channels=[webhook])
    held = window(endpoint=endpoint, start=(now - timedelta(minutes=10)).time())
    held.save()

    evaluate_alert_rules.delay()

    fired = wait_for(lambda: AlertEvent.objects.filter(state="firing", silenced=True).exists())
    assert fired, f"no held alert; worker log:\n{log_path.read_text()[-3000:]}"
    assert not wait_for(lambda: receiver.requests, 3)  # nobody paged

    # The window over (here: switched off), the same breach is announced.
    MaintenanceWindow.objects.filter(pk=held.pk).update(enabled=False)
    evaluate_alert_rules.delay()
    delivered = wait_for(lambda: receiver.requests)
    assert delivered, f"no webhook call; worker log:\n{log_path.read_text()[-3000:]}"
    assert receiver.requests[0]["json"]["state"] == "firing"
    assert proc.poll() is None
