"""Capacity at the moment of the edit: the admin's probe and provider forms work out the
plan a change would make, show it, and refuse what cannot fit unless "save anyway" is
ticked (then recorded in the object's history). View-only staff change nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from probes.models import CanonicalModel, Endpoint, Probe, ProbeRun, Provider, Workload
from tests.probes.test_admin import provider_form

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_slot():
    """A one-slot server whose probe takes 43 s a run, every 60 s (72 % of the slot)."""
    provider = Provider.objects.create(
        name="Acme", slug="acme", base_url="https://api.acme.example/v1", enabled=True,
        requires_key=False, max_concurrency=1,
    )  # fmt: skip
    model = CanonicalModel.objects.create(name="M", slug="m")
    endpoint = Endpoint.objects.create(provider=provider, canonical_model=model, model_id="m-1")
    workload = Workload.objects.create(
        slug="w", name="W", messages=[{"role": "user", "content": "Hi"}], max_tokens=300
    )
    probe = Probe.objects.create(endpoint=endpoint, workload=workload, interval_s=60)
    for minutes in (3, 2, 1):
        ProbeRun.objects.create(
            probe=probe, endpoint=endpoint, workload=workload, region=probe.region,
            started_at=timezone.now() - timedelta(minutes=minutes), status="ok",
            e2e_ms=43_000.0, methodology_version="1",
        )  # fmt: skip
    return probe


def probe_form(probe: Probe, **overrides) -> dict:
    when = timezone.localtime(probe.next_run_at)
    data = {
        "endpoint": probe.endpoint_id,
        "workload": probe.workload_id,
        "region": probe.region,
        "interval_s": probe.interval_s,
        "jitter_s": probe.jitter_s,
        "max_tokens": "",
        "enabled": "on",
        "next_run_at_0": when.strftime("%Y-%m-%d"),
        "next_run_at_1": when.strftime("%H:%M:%S"),
    }
    return {**data, **overrides}


def staff(client, *codenames: str):
    user = User.objects.create_user("staffer", "s@example.com", "pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


def test_an_impossible_interval_is_refused_with_the_plan(admin_client, one_slot):
    url = reverse("admin:probes_probe_change", args=[one_slot.pk])
    refused = admin_client.post(url, probe_form(one_slot, interval_s=30))
    assert refused.status_code == 200  # the form again, with the error
    text = refused.content.decode()
    assert "This change cannot fit: Acme: probes need 143% of 1 slot" in text
    assert 'name="save_anyway"' in text
    one_slot.refresh_from_db()
    assert one_slot.interval_s == 60  # nothing saved


def test_save_anyway_saves_and_is_recorded(admin_client, one_slot):
    url = reverse("admin:probes_probe_change", args=[one_slot.pk])
    saved = admin_client.post(
        url, probe_form(one_slot, interval_s=30, save_anyway="on"), follow=True
    )
    assert saved.status_code == 200
    one_slot.refresh_from_db()
    assert one_slot.interval_s == 30
    notes = LogEntry.objects.filter(object_id=str(one_slot.pk)).values_list(
        "change_message", flat=True
    )
    assert any(n.startswith("Saved anyway over capacity: Acme: probes need 143%") for n in notes)
    assert "Saved anyway over capacity" in saved.content.decode()


def test_save_anyway_is_in_the_history_page_with_who_when_and_why(client, one_slot):
    """Issue 34 item 8: the History page (django-simple-history) showed no trace of a
    save over capacity, which only a LogEntry recorded."""
    user = User.objects.create_user("ops", "o@example.com", "pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(codename__in=["change_probe", "view_probe"])
    )
    client.force_login(user)
    url = reverse("admin:probes_probe_change", args=[one_slot.pk])
    client.post(url, probe_form(one_slot, interval_s=30, save_anyway="on"))
    newest = one_slot.history.first()
    assert newest.interval_s == 30 and newest.history_user == user
    assert newest.history_change_reason.startswith(
        "Saved anyway over capacity: Acme: probes need 143% of 1 slot"
    )
    html = client.get(reverse("admin:probes_probe_history", args=[one_slot.pk])).content.decode()
    row = html[html.index("<tbody>") :].split("</tr>")[0]
    assert "ops" in row and "Saved anyway over capacity: Acme: probes need 143%" in row
    assert "30" in row  # the interval it changed to
    # A save that fits carries no such reason.
    client.post(url, probe_form(one_slot, interval_s=120))
    assert one_slot.history.first().history_change_reason is None


def test_a_provider_saved_anyway_is_in_its_history_with_the_reason(admin_client, one_slot):
    provider = one_slot.endpoint.provider
    Provider.objects.filter(pk=provider.pk).update(max_concurrency=2)
    Probe.objects.filter(pk=one_slot.pk).update(interval_s=40)
    url = reverse("admin:probes_provider_change", args=[provider.pk])
    data = provider_form(
        max_concurrency="1", requires_key="", enabled="on", base_url=provider.base_url,
        save_anyway="on",
    )  # fmt: skip
    admin_client.post(url, data)
    newest = provider.history.first()
    assert newest.max_concurrency == 1 and newest.history_user.username == "boss"
    assert newest.history_change_reason.startswith("Saved anyway over capacity: Acme")


def test_a_change_that_fits_shows_the_plan_it_makes(admin_client, one_slot):
    url = reverse("admin:probes_probe_change", args=[one_slot.pk])
    saved = admin_client.post(url, probe_form(one_slot, interval_s=120), follow=True)
    one_slot.refresh_from_db()
    assert one_slot.interval_s == 120
    assert "Capacity plan after this change: Acme: probes need 36% of 1 slot" in (
        saved.content.decode()
    )


def test_a_new_probe_that_overfills_the_slot_is_refused(admin_client, one_slot):
    data = probe_form(one_slot, interval_s=60)
    data["workload"] = Workload.objects.create(
        slug="w2", name="W2", messages=[{"role": "user", "content": "Hi"}], max_tokens=3000
    ).pk
    refused = admin_client.post(reverse("admin:probes_probe_add"), data)
    assert "This change cannot fit" in refused.content.decode()
    assert Probe.objects.count() == 1


def test_the_changelists_inline_interval_is_refused_too(admin_client, one_slot):
    listing = admin_client.post(
        reverse("admin:probes_probe_changelist"),
        {
            "form-TOTAL_FORMS": "1", "form-INITIAL_FORMS": "1", "form-0-id": one_slot.pk,
            "form-0-interval_s": "30", "form-0-enabled": "on", "_save": "Save",
        },
    )  # fmt: skip
    assert "This change cannot fit" in listing.content.decode()
    one_slot.refresh_from_db()
    assert one_slot.interval_s == 60


def test_lowering_a_providers_concurrency_below_its_probes_is_refused(admin_client, one_slot):
    provider = one_slot.endpoint.provider
    Provider.objects.filter(pk=provider.pk).update(max_concurrency=2)
    Probe.objects.filter(pk=one_slot.pk).update(interval_s=40)  # 43 s of every 40 s: 2 slots
    url = reverse("admin:probes_provider_change", args=[provider.pk])
    data = provider_form(
        max_concurrency="1", requires_key="", enabled="on", base_url=provider.base_url
    )
    refused = admin_client.post(url, data)
    assert "This change cannot fit: Acme: probes need 108% of 1 slot" in refused.content.decode()
    provider.refresh_from_db()
    assert provider.max_concurrency == 2
    saved = admin_client.post(url, {**data, "save_anyway": "on"}, follow=True)
    assert saved.status_code == 200
    provider.refresh_from_db()
    assert provider.max_concurrency == 1
    assert LogEntry.objects.filter(
        object_id=str(provider.pk), change_message__startswith="Saved anyway over capacity"
    ).exists()


def test_view_only_staff_see_no_save_anyway_and_cannot_save(client, one_slot):
    viewer = staff(client, "view_probe", "view_provider")
    url = reverse("admin:probes_probe_change", args=[one_slot.pk])
    page = viewer.get(url)
    assert page.status_code == 200 and 'name="save_anyway"' not in page.content.decode()
    provider_page = viewer.get(
        reverse("admin:probes_provider_change", args=[one_slot.endpoint.provider_id])
    )
    assert provider_page.status_code == 200
    assert 'name="save_anyway"' not in provider_page.content.decode()
    refused = viewer.post(url, probe_form(one_slot, interval_s=30, save_anyway="on"))
    assert refused.status_code == 403
    one_slot.refresh_from_db()
    assert one_slot.interval_s == 60
