"""The reconnect step settles the slots a worker held when its broker connection broke
(probes/scheduling/broker_outage.py). CI once saw the step start while Redis was still
away: it could not settle, had already forgotten the slots, and the slot waited for its
deadline. These pin both halves of the fix without the timing of a real blink
(tests/probes/test_workers.py has that)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from celery import Celery
from celery.worker.consumer.consumer import Consumer

from probes.models import DispatchedSlot
from probes.scheduling import broker_outage, ledger
from tests.probes.conftest import current_slot, free_port


def test_the_reconnect_step_starts_after_the_consumer_is_connected():
    app = Celery("order")
    broker_outage.install(app)
    blueprint = Consumer.Blueprint(steps=app.steps["consumer"])
    names = [step.name for step in blueprint._finalize_steps(blueprint.claim_steps())]
    connection = names.index("celery.worker.consumer.connection.Connection")
    assert names.index("probes.scheduling.broker_outage.BrokerReconnect") > connection


def held(probe, slot) -> str:
    task_id = f"held-{probe.pk}"
    request = SimpleNamespace(
        name=broker_outage.RUN_PROBE, args=[probe.pk, slot.isoformat()], id=task_id
    )
    broker_outage._received(request=request)
    return task_id


def test_a_reconnect_that_cannot_reach_redis_keeps_the_slots_for_the_next_one(make_probe, settings):
    probe = make_probe("sim-fast", interval_s=300)
    slot = current_slot()
    now = datetime.now(UTC)
    row = ledger.entry_for(probe, slot, slot + timedelta(seconds=300), now)
    row.save()
    task_id = held(probe, slot)
    live = settings.CELERY_BROKER_URL, settings.REDIS_URL
    try:
        settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"  # nobody listens
        settings.REDIS_URL = settings.CELERY_BROKER_URL
        assert broker_outage.reconnected("w1@test") == 0
        assert task_id in broker_outage.held_now()
        assert DispatchedSlot.objects.get(pk=row.pk).deadline == row.deadline

        settings.CELERY_BROKER_URL, settings.REDIS_URL = live  # Redis is back
        assert broker_outage.reconnected("w1@test") == 1
        assert task_id not in broker_outage.held_now()
        assert DispatchedSlot.objects.get(pk=row.pk).deadline <= datetime.now(UTC)
    finally:
        broker_outage.forget([task_id])
