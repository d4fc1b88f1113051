"""Liveness marks in Redis: each worker records a heartbeat every few seconds, beat's
dispatcher records a tick each time it runs, and /status reads them back.

A mark is a key holding a Unix timestamp that expires on its own, so a dead process simply
disappears instead of leaving a stale row behind.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import redis
from celery import bootsteps

from probes.redis_client import redis_client

log = logging.getLogger(__name__)

PREFIX = "inferwatch:heartbeat"
WORKER_INTERVAL_S = 15
# Long enough to span several missed beats, short enough that a dead worker vanishes soon.
TTL_S = 600


def _key(kind: str, name: str) -> str:
    return f"{PREFIX}:{kind}:{name}"


def record_heartbeat(kind: str, name: str, client: redis.Redis | None = None) -> None:
    """Mark `name` (a worker's hostname, "beat") of `kind` as alive now.

    Never raises: losing one heartbeat must not break the task or worker that records it.
    """
    try:
        (client or redis_client()).set(_key(kind, name), f"{time.time():.3f}", ex=TTL_S)
    except redis.RedisError as exc:
        log.warning("could not record %s heartbeat for %s: %s", kind, name, exc)


def record_beat_tick(client: redis.Redis | None = None) -> None:
    """Called by the dispatcher task each time beat runs it."""
    record_heartbeat("beat", "dispatcher", client)


def read_heartbeats(kind: str, client: redis.Redis | None = None) -> dict[str, datetime]:
    """Last heartbeat per name of `kind`, as UTC datetimes. Raises redis.RedisError."""
    client = client or redis_client()
    prefix = _key(kind, "")
    keys = sorted(client.scan_iter(match=prefix + "*", count=500))
    values = client.mget(keys) if keys else []
    return {
        key.removeprefix(prefix): datetime.fromtimestamp(float(value), tz=UTC)
        for key, value in zip(keys, values, strict=True)
        if value is not None
    }


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
