"""Liveness marks in Redis: each worker records a heartbeat every few seconds, beat's
dispatcher records a tick each time it runs, and /status reads them back.

A mark is a key holding a Unix timestamp that expires on its own, so a dead process simply
disappears instead of leaving a stale row behind.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from celery import bootsteps

from probes.platform.redis_client import redis_client, values_under

if TYPE_CHECKING:
    import redis

log = logging.getLogger(__name__)

PREFIX = "inferwatch:heartbeat"
WORKER_INTERVAL_S = 15
# Long enough to span several missed beats, short enough that a dead worker vanishes soon.
TTL_S = 600
# How long the sweeper remembers that a worker stopped cleanly, died, or lost its
# database: longer than any slot stays open (a queued slot's deadline is its next slot,
# at most an interval away; started slots of a restarted worker are settled at once).
MARK_TTL_S = 2 * 3600
# Set while this process's worker shuts down: its waiting slots give their turn up.
_stopping_here = threading.Event()


def _key(kind: str, name: str) -> str:
    return f"{PREFIX}:{kind}:{name}"


def record_heartbeat(
    kind: str, name: str, client: redis.Redis | None = None, ttl_s: int = TTL_S
) -> None:
    """Mark `name` (a worker's hostname, "beat") of `kind` as alive now.

    Never raises: losing one heartbeat must not break the task or worker that records it.
    """
    import redis  # loaded by redis_client already; here for its error class

    try:
        (client or redis_client()).set(_key(kind, name), f"{time.time():.3f}", ex=ttl_s)
    except redis.RedisError as exc:
        log.warning("could not record %s heartbeat for %s: %s", kind, name, exc)


def record_beat_tick(client: redis.Redis | None = None) -> None:
    """Called by the dispatcher task each time beat runs it."""
    record_heartbeat("beat", "dispatcher", client)


def read_heartbeats(kind: str, client: redis.Redis | None = None) -> dict[str, datetime]:
    """Last heartbeat per name of `kind`, as UTC datetimes. Raises redis.RedisError."""
    marks = values_under(client or redis_client(), _key(kind, ""))
    return {name: datetime.fromtimestamp(float(value), tz=UTC) for name, value in marks.items()}


# -- what the sweeper knows of workers that went away -----------------------------------------
# Kinds of marks: "stopped" (a clean shutdown began), "started" (a worker started),
# "killed" (it restarted without a clean stop), "db-away" (a worker could not reach the
# database), "broker-away" (a worker connected to Redis again: broker_outage.py).
# read_heartbeats(kind) reads them.


def record_mark(kind: str, name: str, client: redis.Redis | None = None) -> None:
    record_heartbeat(kind, name, client, ttl_s=MARK_TTL_S)


def mark_stopping(name: str, client: redis.Redis | None = None) -> None:
    """The worker `name` begins a clean stop (Ctrl-C, SIGTERM, a deploy): its slots still
    waiting for a cap give up their turn (is_stopping), and the sweeper records what it
    leaves behind as stopped, not lost."""
    _stopping_here.set()
    record_mark("stopped", name, client)
    record_mark("stopping", name, client)


def is_stopping(name: str, client: redis.Redis | None = None) -> bool:
    """Is `name` shutting down? Asked by slots waiting for a cap, in any of its processes
    (a prefork child learns it from Redis). False when Redis cannot say."""
    if _stopping_here.is_set():
        return True
    import redis  # loaded by redis_client already; here for its error class

    try:
        return bool((client or redis_client()).exists(_key("stopping", name)))
    except redis.RedisError:
        return False


def starting_again(name: str, client: redis.Redis | None = None) -> bool:
    """A worker `name` starts: True if its previous run ended with a clean stop. Clears
    the stopping flag (the marks stay for the sweeper)."""
    _stopping_here.clear()
    return bool((client or redis_client()).delete(_key("stopping", name)))


def install_worker_heartbeat(app) -> None:
    """Make every Celery worker of `app` record a heartbeat every WORKER_INTERVAL_S."""

    class WorkerHeartbeat(bootsteps.StartStopStep):
        requires = {"celery.worker.components:Timer"}

        def start(self, worker) -> None:
            name = worker.hostname
            record_heartbeat("worker", name)
            self.tref = worker.timer.call_repeatedly(
                WORKER_INTERVAL_S, record_heartbeat, ("worker", name), priority=10
            )

        def stop(self, worker) -> None:
            if getattr(self, "tref", None):
                self.tref.cancel()

    app.steps["worker"].add(WorkerHeartbeat)
