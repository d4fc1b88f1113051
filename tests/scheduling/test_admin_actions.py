"""The operator's "Run now" and "Test connection" actions, through the real admin."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from probes.models import ProbeRun

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
