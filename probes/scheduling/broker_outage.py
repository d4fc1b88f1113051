"""Slots a worker held when its broker connection broke are settled at once, not an hour
later.

A worker takes a slot's message as soon as it is queued, and holds it until its countdown
(the slot's phase) ends. When the connection to Redis breaks, Celery drops what it holds
but has not started (a delivery tag is only good on its own channel), and Redis hands the
message back only after the visibility timeout, an hour on, long past the task's `expires`:
the slot would wait for its ledger deadline (the probe's next slot) and end lost.

So each worker remembers the slots it holds and has not started. When its consumer
connects again, it records a "broker-away" mark (probes/scheduling/heartbeat.py); a slot
whose message kombu gave back to its queue runs as sent, and for the others the dropped
copy is taken out of kombu's unacked hash and the ledger deadline brought forward to now:
the next sweep re-sends each that can still start before the probe's next slot (its only
copy, so the slot runs once), and skips the others as "broker away", like a slot that
could not be dispatched while Redis was away ("missed"), never as lost (ledger.settle).
"""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime

from celery import bootsteps
from celery.signals import task_prerun, task_received, task_revoked
from django.conf import settings

from probes.platform.redis_client import redis_client
from probes.scheduling import heartbeat

log = logging.getLogger(__name__)

RUN_PROBE = "probes.tasks.run_probe"
# kombu's Redis transport: messages a channel took and has not acked, and their ages.
UNACKED, UNACKED_INDEX = "unacked", "unacked_index"

_held: dict[str, tuple[int, datetime]] = {}  # request id -> (probe id, slot)
MAX_HELD = 10_000
_lock = threading.Lock()


def _received(sender=None, request=None, **kwargs) -> None:
    if request is None or request.name != RUN_PROBE:
        return
    args = list(request.args or ())
    if len(args) < 2 or not args[1]:
        return  # a manual run has no slot
    try:
        slot = (int(args[0]), datetime.fromisoformat(args[1]))
    except (TypeError, ValueError):
        return
    with _lock:
        if len(_held) >= MAX_HELD:
            # A prefork pool starts tasks in its children, where no prerun reaches this
            # process: forget the oldest rather than grow (their slots are long settled).
            for key in sorted(_held, key=lambda k: _held[k][1])[: MAX_HELD // 2]:
                del _held[key]
        _held[request.id] = slot


def _started_or_gone(sender=None, task_id=None, request=None, **kwargs) -> None:
    """Started (prerun: a running task finishes on its own) or revoked (expired)."""
    task_id = task_id or getattr(request, "id", None)
    with _lock:
        _held.pop(task_id, None)


def held_now() -> dict[str, tuple[int, datetime]]:
    """The slots held and not started: the connection that held them broke."""
    with _lock:
        return dict(_held)


def forget(task_ids) -> None:
    """Settled: forgotten here (kept until then, so a reconnect that fails tries again)."""
    with _lock:
        for task_id in task_ids:
            _held.pop(task_id, None)


def _task_id(raw: str | bytes) -> str | None:
    try:
        message = json.loads(raw)
    except ValueError:
        return None
    if isinstance(message, list):  # the unacked hash keeps [message, exchange, routing key]
        message = message[0] if message else {}
    return (message.get("headers") or {}).get("id") if isinstance(message, dict) else None


def gone_for_good(client, task_ids: set[str]) -> set[str]:
    """Of `task_ids`, those no worker will be handed again in time. A message still in a
    probes queue was given back (kombu restores what a channel held as it closes, when it
    can): it runs as sent. One left in kombu's unacked hash would come back only after the
    visibility timeout: it is taken out there, so the re-send is the slot's only copy."""
    waiting = set()
    for queue in client.scan_iter(match="probes.*"):
        if client.type(queue) in (b"list", "list"):
            waiting |= {_task_id(raw) for raw in client.lrange(queue, 0, -1)}
    for tag, raw in client.hgetall(UNACKED).items():
        if _task_id(raw) in task_ids:
            client.hdel(UNACKED, tag)
            client.zrem(UNACKED_INDEX, tag)
    return task_ids - waiting


def reconnected(worker: str) -> int:
    """The consumer connected again after a broken connection: mark it, and bring the
    dropped slots' deadlines forward. Returns how many slots were brought forward."""
    from probes.scheduling import ledger  # the ORM: a worker's, once Django is set up

    dropped = held_now()
    try:
        heartbeat.record_mark("broker-away", worker)
        client = redis_client(settings.CELERY_BROKER_URL)
        gone = gone_for_good(client, set(dropped))
        client.close()
        moved = ledger.settle_soon([dropped[task_id] for task_id in gone], datetime.now(UTC))
    except Exception as exc:  # noqa: BLE001 - Redis blinked again: kept for the next reconnect
        log.warning("could not settle the slots dropped with the broker: %s", exc)
        return 0
    forget(dropped)
    if dropped:
        log.warning(
            "Broker connection restored: %d slot(s) held and not started were dropped with "
            "it; the next sweep re-sends or skips them",
            moved,
        )
    return moved


class BrokerReconnect(bootsteps.StartStopStep):
    """A consumer step: started on the first connection and again on every reconnection.

    It requires the Connection step, so it starts once the consumer is connected again:
    unordered, it could start first, while Redis was still away (it did, now and then)."""

    requires = ("celery.worker.consumer.connection:Connection",)

    def __init__(self, consumer, **kwargs) -> None:
        super().__init__(consumer, **kwargs)
        self.connections = 0

    def start(self, consumer) -> None:
        self.connections += 1
        if self.connections > 1:
            reconnected(consumer.hostname)


def install(app) -> None:
    task_received.connect(_received, weak=False)
    task_prerun.connect(_started_or_gone, weak=False)
    task_revoked.connect(_started_or_gone, weak=False)
    app.steps["consumer"].add(BrokerReconnect)
