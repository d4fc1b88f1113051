"""The dispatcher claims each due slot exactly once and queues it where it belongs."""

from __future__ import annotations

import itertools
import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from probes.models import DispatchedSlot, Probe
from probes.scheduling import dispatch
from probes.tasks import dispatch_due_probes

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def due(probes, when=NOW - timedelta(seconds=1)):
    Probe.objects.filter(pk__in=[p.pk for p in probes]).update(next_run_at=when)


@pytest.mark.django_db(transaction=True)
def test_it_claims_each_slot_once_even_with_four_dispatchers_racing(make_probe):
    probes = [make_probe() for _ in range(60)]
    due(probes)
    sent: list[dispatch.Slot] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def dispatcher():
        start.wait()
        try:
            dispatch.dispatch_due(
                lambda slot: (lock.acquire(), sent.append(slot), lock.release()), NOW
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=dispatcher) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(s.probe_id for s in sent) == sorted(p.pk for p in probes)
    # A second round at the same moment finds nothing due.
    assert dispatch.dispatch_due(lambda slot: None, NOW) == []


@pytest.mark.django_db(transaction=True)
def test_after_downtime_the_missed_slot_is_skipped_and_the_schedule_goes_on_from_now(
    make_probe,
):
    probe = make_probe(interval_s=60)
    due([probe], NOW - timedelta(minutes=10, seconds=5))  # beat was down ten minutes

    assert dispatch.dispatch_due(lambda slot: None, NOW) == []  # not run late

    probe.refresh_from_db()
    assert probe.next_run_at == NOW + timedelta(seconds=55)  # the next slot after now
    (skipped,) = DispatchedSlot.objects.filter(probe=probe)
    assert skipped.state == "skipped" and "not run late" in skipped.reason
    assert skipped.slot_at == NOW - timedelta(minutes=10, seconds=5)
    # The next tick finds nothing; the slot after now runs on time.
    assert dispatch.dispatch_due(lambda slot: None, NOW + timedelta(seconds=5)) == []
    (slot,) = dispatch.dispatch_due(lambda slot: None, NOW + timedelta(seconds=55))
    assert slot.slot_at == NOW + timedelta(seconds=55)


def test_a_slot_a_tick_late_still_runs(make_probe):
    probe = make_probe(interval_s=60)
    due([probe], NOW - timedelta(seconds=4))
    (slot,) = dispatch.dispatch_due(lambda slot: None, NOW)
    assert slot.slot_at == NOW - timedelta(seconds=4)


def test_shortening_the_interval_long_after_the_last_slot_does_not_replay_missed_slots(
    make_probe,
):
    probe = make_probe(interval_s=900)
    due([probe], NOW - timedelta(seconds=1))
    dispatch.dispatch_due(lambda slot: None, NOW)
    probe.refresh_from_db()
    probe.interval_s = 10  # the admin edit, six minutes later
    probe.save()

    later = NOW + timedelta(minutes=6)
    sent = []
    for tick in range(8):  # 40 s of ticks: no burst, one run per 10 s at most
        sent += dispatch.dispatch_due(lambda slot: None, later + timedelta(seconds=5 * tick))
    starts = sorted(s.slot_at for s in sent)
    assert len(starts) == 4 and starts[0] >= later  # slots at +9, +19, +29, +39 s
    assert all(b - a >= timedelta(seconds=10) for a, b in itertools.pairwise(starts))


@pytest.mark.django_db(transaction=True)
def test_an_admin_edit_of_the_interval_takes_effect_at_the_next_dispatch(make_probe):
    probe = make_probe(interval_s=600)
    due([probe], NOW)
    dispatch.dispatch_due(lambda slot: None, NOW)
    assert dispatch.dispatch_due(lambda slot: None, NOW + timedelta(seconds=61)) == []

    probe.refresh_from_db()
    probe.interval_s = 60
    probe.save()  # as the admin does

    (slot,) = dispatch.dispatch_due(lambda slot: None, NOW + timedelta(seconds=61))
    assert slot.slot_at == NOW + timedelta(seconds=60)
    probe.refresh_from_db()
    assert probe.next_run_at == NOW + timedelta(seconds=120)


@pytest.mark.django_db(transaction=True)
def test_disabled_probes_and_providers_are_not_dispatched(make_probe):
    off = make_probe(enabled=False)
    provider_off = make_probe()
    provider_off.endpoint.provider.enabled = False
    provider_off.endpoint.provider.save()
    on = make_probe()
    due([off, provider_off, on])

    assert [s.probe_id for s in dispatch.dispatch_due(lambda slot: None, NOW)] == [on.pk]


@pytest.mark.django_db(transaction=True)
def test_a_slot_whose_task_could_not_be_sent_is_retried_next_tick(make_probe):
    probe = make_probe()
    due([probe])

    def broker_down(slot):
        raise ConnectionError("redis away")

    with pytest.raises(ConnectionError):
        dispatch.dispatch_due(broker_down, NOW)
    assert len(dispatch.dispatch_due(lambda slot: None, NOW)) == 1


@pytest.mark.django_db(transaction=True)
def test_the_task_goes_to_the_region_queue_and_expires_at_the_next_slot(make_probe, clean_redis):
    probe = make_probe(region="eu-west", interval_s=120, jitter_s=5)
    due([probe], datetime.now(UTC) - timedelta(seconds=1))

    assert dispatch_due_probes() == 1

    probe.refresh_from_db()
    assert clean_redis.llen("probes.local") == 0
    (raw,) = clean_redis.lrange("probes.eu-west", 0, -1)
    headers = json.loads(raw)["headers"]
    assert headers["task"] == "probes.tasks.run_probe"
    assert json.loads(headers["argsrepr"].replace("'", '"'))[0] == probe.pk
    expires = datetime.fromisoformat(headers["expires"])
    assert expires == probe.next_run_at
    eta = datetime.fromisoformat(headers["eta"])
    assert probe.last_dispatched_at <= eta <= expires  # jitter delays, never past the slot
    assert clean_redis.exists("inferwatch:heartbeat:beat:dispatcher")


@pytest.mark.django_db(transaction=True)
def test_a_slot_due_before_the_next_tick_is_queued_now_to_start_on_time(make_probe):
    soon = make_probe(interval_s=60)
    later = make_probe(interval_s=60)
    due([soon], NOW + timedelta(seconds=3))
    due([later], NOW + timedelta(seconds=8))

    (slot,) = dispatch.dispatch_due(lambda slot: None, NOW, lookahead_s=5)

    assert slot.probe_id == soon.pk
    assert slot.delay_s == pytest.approx(3.0)
