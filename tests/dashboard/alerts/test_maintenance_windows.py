"""Recurring maintenance windows: when they are on, alerts held during them (through a
real worker), probes paused by them, and probes.yaml declaring them."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.core.exceptions import ValidationError
from django.utils import timezone

from dashboard.alerts.models import AlertEvent
from dashboard.alerts.tasks import evaluate_alert_rules
from probes.catalog.yaml_file import CatalogFileError, load_text
from probes.models import DispatchedSlot, MaintenanceWindow, Probe, ProbeRun, Workload
from probes.recording import standby
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


# -- weekly windows in the admin (issue 34 item 8) ----------------------------------------------

SUNDAY = datetime(2025, 12, 7, 2, 30, tzinfo=UTC)  # a Sunday, 02:30 UTC
MONDAY = SUNDAY + timedelta(days=1)


def window_form(endpoint, **fields) -> dict:
    data = {
        "name": "Sunday backup",
        "provider": endpoint.provider_id,
        "endpoint": "",
        "start": "02:00",
        "duration": "02:00:00",
        "time_zone": "UTC",
        "repeats": "weekly",
        "weekdays": ["sunday"],
        "pause_probes": "on",
        "enabled": "on",
        "reason": "",
    }
    return data | fields


def test_a_weekly_window_is_made_in_the_admin_with_weekday_boxes(admin_client, endpoint):
    """The admin took the weekdays as a raw JSON list ("sunday" alone was refused as
    invalid JSON) and listed them as ["sunday"]: weekly windows looked impossible."""
    add = "/admin/probes/maintenancewindow/add/"
    form = admin_client.get(add).content.decode()
    assert 'type="checkbox" name="weekdays" value="sunday"' in form
    saved = admin_client.post(add, window_form(endpoint))
    assert saved.status_code == 302, saved.content.decode()[:3000]
    row = MaintenanceWindow.objects.get()
    assert row.days == ["sunday"] and row.pause_probes
    assert row.schedule_label == "every Sunday 02:00–04:00 UTC"
    listing = admin_client.get("/admin/probes/maintenancewindow/").content.decode()
    assert "every Sunday 02:00–04:00 UTC" in listing
    # Opened again, Sunday is ticked and the window is weekly.
    page = admin_client.get(f"/admin/probes/maintenancewindow/{row.pk}/change/")
    form = page.context["adminform"].form
    assert form["repeats"].value() == "weekly" and form["weekdays"].value() == ["sunday"]

    # It pauses probes and holds alerts on Sundays only, read live or as a worker kept it.
    assert row.active_at(SUNDAY) and not row.active_at(MONDAY)
    assert maintenance.window_at(endpoint, SUNDAY, pausing=True) == row
    assert maintenance.window_at(endpoint, MONDAY) is None
    probe = Probe.objects.create(endpoint=endpoint, workload=Workload.objects.create(
        slug="w", name="W", messages=[{"role": "user", "content": "Hi"}]
    ))  # fmt: skip
    standby.keep(probe, maintenance.pausing_windows(endpoint))
    kept = standby.recall(probe.pk).windows
    assert maintenance.active(kept, SUNDAY) == row and maintenance.active(kept, MONDAY) is None


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"weekdays": []}, "weekdays", "Tick the weekdays it recurs on, or choose every day."),
        ({"repeats": "daily"}, "weekdays", "Every day needs no weekdays"),
        ({"duration": "00:00:00"}, "duration", "Between a second and 7 days."),
        ({"start": "25:00"}, "start", "Enter a valid time."),
        ({"time_zone": "Mars/Olympus"}, "time_zone", "Unknown time zone"),
    ],
)
def test_a_bad_weekly_window_is_refused_with_a_clear_error(
    admin_client, endpoint, fields, field, message
):
    refused = admin_client.post(
        "/admin/probes/maintenancewindow/add/", window_form(endpoint, **fields)
    )
    assert refused.status_code == 200
    errors = refused.context["adminform"].form.errors
    assert message in " ".join(errors[field]), errors
    assert not MaintenanceWindow.objects.exists()


def test_every_weekday_ticked_is_every_day(admin_client, endpoint):
    every = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    admin_client.post("/admin/probes/maintenancewindow/add/", window_form(endpoint, weekdays=every))
    row = MaintenanceWindow.objects.get()
    assert row.days == [] and row.schedule_label == "every day 02:00–04:00 UTC"


def test_view_only_staff_read_the_schedule_and_change_nothing(client, endpoint):
    row = window(provider=endpoint.provider, days=["saturday", "sunday"], time_zone="UTC")
    row.save()
    viewer = User.objects.create_user("viewer", "v@example.com", "pw", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_maintenancewindow"))
    client.force_login(viewer)
    page = client.get(f"/admin/probes/maintenancewindow/{row.pk}/change/")
    assert page.status_code == 200
    assert "every Saturday and Sunday 23:00–00:00 (next day) UTC" in page.content.decode()
    assert 'name="weekdays"' not in page.content.decode()
    refused = client.post(
        f"/admin/probes/maintenancewindow/{row.pk}/change/",
        window_form(endpoint, name="nightly", weekdays=["monday"]),
    )
    assert refused.status_code == 403
    row.refresh_from_db()
    assert row.days == ["saturday", "sunday"]


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
