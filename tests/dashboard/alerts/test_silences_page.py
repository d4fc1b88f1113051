"""Silences made and ended from /alerts/ (issue 18 item 7), respecting Django's
permissions: add needs alerts.add_silence, ending alerts.change_silence; view-only staff
and visitors see the list and no form, and their POSTs are refused."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from dashboard.alerts.models import Silence

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(django_user_model):
    def make(*perms: str):
        user = django_user_model.objects.create_user(
            f"u{len(perms)}", password="pw-pw-pw-pw", is_staff=True
        )
        user.user_permissions.set(Permission.objects.filter(codename__in=perms))
        return user

    return make


def test_staff_who_may_add_create_a_silence_from_the_alerts_page(client, staff, endpoint):
    client.force_login(staff("add_silence", "view_silence"))
    page = client.get("/alerts/").content.decode()
    assert 'id="silence-form"' in page and "End now" not in page
    before = timezone.now()
    response = client.post(
        "/alerts/silences/", {"endpoint": endpoint.pk, "hours": 3, "reason": "upgrade"}
    )
    assert response.status_code == 302
    silence = Silence.objects.get()
    assert silence.endpoint == endpoint and silence.reason == "upgrade"
    assert silence.created_by == "u2"
    hours = (silence.ends_at - before).total_seconds() / 3600
    assert 2.99 < hours < 3.01
    assert "upgrade" in client.get("/alerts/").content.decode()


def test_bad_input_is_a_clear_error_and_creates_nothing(client, staff):
    client.force_login(staff("add_silence"))
    response = client.post("/alerts/silences/", {"hours": 0, "reason": ""})
    assert response.status_code == 400
    text = response.content.decode()
    assert "This field is required." in text and "greater than or equal to 1" in text
    assert not Silence.objects.exists()


def test_staff_who_may_change_end_a_silence_now(client, staff):
    silence = Silence.objects.create(
        ends_at=timezone.now() + timezone.timedelta(hours=5), reason="incident"
    )
    client.force_login(staff("change_silence"))
    page = client.get("/alerts/").content.decode()
    assert "End now" in page and 'id="silence-form"' not in page
    assert client.post(f"/alerts/silences/{silence.pk}/end/").status_code == 302
    silence.refresh_from_db()
    assert silence.ends_at <= timezone.now()
    assert not Silence.objects.active().exists()


def test_view_only_staff_and_visitors_see_no_form_and_are_refused(client, staff, endpoint):
    silence = Silence.objects.create(
        ends_at=timezone.now() + timezone.timedelta(hours=5), reason="incident"
    )
    for who in (None, staff("view_silence")):
        client.logout()
        if who:
            client.force_login(who)
        page = client.get("/alerts/").content.decode()
        assert "incident" in page
        assert 'id="silence-form"' not in page and "End now" not in page
        assert client.post("/alerts/silences/", {"hours": 1, "reason": "x"}).status_code == 403
        assert client.post(f"/alerts/silences/{silence.pk}/end/").status_code == 403
    assert Silence.objects.count() == 1 and Silence.objects.active().exists()


def test_a_silence_without_a_scope_needs_a_superuser(client, staff, endpoint, django_user_model):
    client.force_login(staff("add_silence", "view_silence"))
    refused = client.post("/alerts/silences/", {"hours": 720, "reason": "quiet please"})
    assert refused.status_code == 400
    assert "A silence needs a scope" in refused.content.decode()
    assert not Silence.objects.exists()

    scoped = client.post("/alerts/silences/", {"endpoint": endpoint.pk, "hours": 2, "reason": "x"})
    assert scoped.status_code == 302 and Silence.objects.count() == 1

    chief = django_user_model.objects.create_superuser("chief", "c@example.com", "pw-pw-pw-pw")
    client.force_login(chief)
    everything = client.post("/alerts/silences/", {"hours": 1, "reason": "planned outage"})
    assert everything.status_code == 302
    assert Silence.objects.get(reason="planned outage").scope_label == "everything"


def test_the_admin_refuses_an_unscoped_silence_from_staff_too(client, staff):
    user = staff("add_silence", "view_silence", "change_silence")
    client.force_login(user)
    now = timezone.now()
    response = client.post(
        "/admin/alerts/silence/add/",
        {
            "starts_at_0": now.strftime("%Y-%m-%d"),
            "starts_at_1": now.strftime("%H:%M:%S"),
            "ends_at_0": (now + timezone.timedelta(days=30)).strftime("%Y-%m-%d"),
            "ends_at_1": now.strftime("%H:%M:%S"),
            "reason": "everything off",
        },
    )
    assert response.status_code == 200  # the form again, with the error
    assert "A silence needs a scope" in response.content.decode()
    assert not Silence.objects.exists()
