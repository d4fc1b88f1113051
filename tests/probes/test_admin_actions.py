"""The operator's "Run now" and "Test connection" actions, through the real admin."""

from __future__ import annotations

import pytest
from django.contrib.admin import site
from django.contrib.auth.models import Permission, User
from django.contrib.messages.storage.fallback import FallbackStorage
from django.test import RequestFactory
from django.urls import reverse

from probes.admin import operator_actions
from probes.models import Probe, ProbeRun, Provider

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def operator(client):
    user = User.objects.create_superuser("op", "op@example.com", "a-long-password")
    client.force_login(user)
    return client


def test_run_now_measures_records_and_shows_the_result(operator, make_probe):
    probe = make_probe("sim-fast")

    response = operator.post(
        reverse("admin:probes_probe_changelist"),
        {"action": "run_now", "_selected_action": [probe.pk]},
        follow=True,
    )

    (run,) = ProbeRun.objects.all()
    assert run.probe == probe and run.slot_at is None and run.worker.startswith("admin@")
    text = response.content.decode()
    assert "ok · HTTP 200 · TTFT" in text


def test_test_connection_reports_a_failure_without_recording_it(operator, make_probe):
    provider = make_probe("sim-fast@fault=auth").endpoint.provider

    response = operator.post(
        reverse("admin:probes_provider_changelist"),
        {"action": "test_connection", "_selected_action": [provider.pk]},
        follow=True,
    )

    assert "auth_error · HTTP 401" in response.content.decode()
    assert ProbeRun.objects.count() == 0


# -- only users who may change the model run the actions ----------------------------------


@pytest.fixture
def viewer(client):
    """Staff who may look at probes and providers but change nothing."""
    user = User.objects.create_user("viewer", "viewer@example.com", "pw", is_staff=True)
    codenames = ["view_probe", "view_provider", "view_endpoint", "view_proberun"]
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    client.force_login(user)
    return client


def test_a_view_only_user_can_neither_see_nor_post_run_now(viewer, make_probe):
    probe = make_probe("sim-fast")
    url = reverse("admin:probes_probe_changelist")

    assert "Run now" not in viewer.get(url).content.decode()
    response = viewer.post(url, {"action": "run_now", "_selected_action": [probe.pk]})

    assert response.status_code in (200, 302, 403)
    assert ProbeRun.objects.count() == 0


def test_a_view_only_user_cannot_test_a_connection(viewer, make_probe, counting_provider):
    base_url, received = counting_provider
    provider = make_probe("sim-fast").endpoint.provider
    Provider.objects.filter(pk=provider.pk).update(base_url=base_url)
    url = reverse("admin:probes_provider_changelist")

    assert "Test connection" not in viewer.get(url).content.decode()
    viewer.post(url, {"action": "test_connection", "_selected_action": [provider.pk]})

    assert received == []


@pytest.mark.parametrize(
    ("model", "action"),
    [(Probe, operator_actions.run_now), (Provider, operator_actions.test_connection)],
)
def test_an_action_called_for_a_view_only_user_refuses_and_says_so(
    viewer, make_probe, counting_provider, model, action
):
    # The actions are plain functions another view could call: they check for themselves.
    base_url, received = counting_provider
    probe = make_probe("sim-fast")
    Provider.objects.filter(pk=probe.endpoint.provider_id).update(base_url=base_url)
    request = RequestFactory().post("/")
    request.user = User.objects.get(username="viewer")
    request.session = {}
    request._messages = FallbackStorage(request)

    action(site._registry[model], request, model.objects.all())

    (message,) = [str(m) for m in request._messages]
    assert message.startswith("Permission denied") and "nothing ran" in message
    assert received == [] and ProbeRun.objects.count() == 0


def test_test_connection_never_sends_a_variable_that_is_not_allowed(
    operator, make_probe, counting_provider, monkeypatch
):
    base_url, received = counting_provider
    provider = make_probe("sim-fast").endpoint.provider
    monkeypatch.setenv("EMAIL_HOST_PASSWORD", "smtp-password-123")
    # Stored behind the form's back (SQL, an old catalog): refused when it is used.
    Provider.objects.filter(pk=provider.pk).update(
        base_url=base_url, api_key_env="EMAIL_HOST_PASSWORD", requires_key=True
    )

    response = operator.post(
        reverse("admin:probes_provider_changelist"),
        {"action": "test_connection", "_selected_action": [provider.pk]},
        follow=True,
    )

    assert received == []
    text = response.content.decode()
    assert "not sent: API key variable EMAIL_HOST_PASSWORD is one of Inferwatch" in text
    assert "smtp-password-123" not in text
