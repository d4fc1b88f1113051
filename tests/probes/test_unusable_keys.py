"""A provider whose configured key cannot be used is never probed without it: the slot
ends as one stored run saying why, and nothing reaches the provider."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet

from probes.models import DispatchedSlot, Probe, ProbeRun, Provider
from probes.scheduling import dispatch
from probes.tasks import run_probe, send_slot
from tests.probes.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def claim(probe: Probe, send=lambda slot: None) -> dispatch.Slot:
    Probe.objects.filter(pk=probe.pk).update(next_run_at=datetime.now(UTC) - timedelta(seconds=1))
    (slot,) = dispatch.dispatch_due(send)
    return slot


def keyed_probe(make_probe, base_url: str, **provider_fields) -> Probe:
    probe = make_probe("sim-fast")
    Provider.objects.filter(pk=probe.endpoint.provider_id).update(
        base_url=base_url, requires_key=True, **provider_fields
    )
    return Probe.objects.select_related("endpoint__provider", "workload").get(pk=probe.pk)


def test_a_refused_key_variable_ends_the_slot_as_one_unsent_run(
    make_probe, counting_provider, workload, monkeypatch
):
    base_url, received = counting_provider
    monkeypatch.setenv("SECRET_KEY", "the-apps-own-secret")
    workload.requests = 3  # a multi-request slot still ends as one run
    workload.save()
    probe = keyed_probe(make_probe, base_url, api_key_env="SECRET_KEY")
    slot = claim(probe)

    run_probe.apply(args=[probe.pk, slot.slot_at.isoformat()])

    (run,) = ProbeRun.objects.all()
    assert (run.status, run.http_status, run.slot_at) == ("auth_error", None, slot.slot_at)
    assert run.error.startswith("not sent: API key variable SECRET_KEY is one of Inferwatch")
    assert "the-apps-own-secret" not in run.error
    assert DispatchedSlot.objects.get(probe=probe).state == "done"
    assert received == []


@pytest.mark.worker
def test_a_worker_records_an_undecryptable_key_instead_of_probing_without_it(
    make_probe, counting_provider, processes, clean_redis
):
    base_url, received = counting_provider
    # A token from a key the worker does not know: as after a FIELD_ENCRYPTION_KEY
    # rotation without FIELD_ENCRYPTION_KEY_FALLBACKS.
    lost_key_token = Fernet(Fernet.generate_key()).encrypt(b"sk-lost-key").decode()
    probe = keyed_probe(make_probe, base_url, api_key_encrypted=lost_key_token)
    processes.worker("keys")

    slot = claim(probe, send_slot)

    run = wait_for(lambda: ProbeRun.objects.filter(probe=probe).first(), timeout_s=30)
    assert run is not None, "no run was recorded"
    assert (run.status, run.http_status, run.slot_at) == ("auth_error", None, slot.slot_at)
    assert "stored API key cannot be decrypted (rotated FIELD_ENCRYPTION_KEY?)" in run.error
    assert wait_for(lambda: DispatchedSlot.objects.get(probe=probe).state == "done", 10)
    assert ProbeRun.objects.count() == 1
    assert received == []


def test_a_provider_that_needs_a_key_and_has_none_is_not_sent_a_request(
    make_probe, counting_provider, monkeypatch
):
    # The catalog's real providers until someone gives them a key: `run_probe` on one
    # must not reach the vendor anonymously.
    base_url, received = counting_provider
    monkeypatch.delenv("IW_NEWCOMER_API_KEY", raising=False)
    probe = keyed_probe(make_probe, base_url, api_key_env="IW_NEWCOMER_API_KEY")

    run_probe.apply(args=[probe.pk, None])

    (run,) = ProbeRun.objects.all()
    assert (run.status, run.http_status) == ("auth_error", None)
    assert run.error == "not sent: no API key (set IW_NEWCOMER_API_KEY or store one in the admin)"
    assert received == []
