"""A guard around one kombu bug that stops a worker when Redis goes away mid-task.

With late acks, a worker whose broker connection drops closes its channel and tries to
put its unacknowledged messages back. Kombu may by then have detached the connection
from the transport (`transport.client is None`), so building a Redis client raises
AttributeError ('NoneType' object has no attribute 'hostname') instead of a connection
error. Celery takes an AttributeError for a bug in the worker and exits: after a Redis
restart the worker is gone instead of reconnecting (seen in
tests/probes/test_workers.py). The unacknowledged messages are still in Redis's
`unacked` hash, restored after the visibility timeout (and the slot ledger re-sends
sooner), so reporting the situation as the connection error it is lets Celery do what it
does for any lost connection: reconnect and carry on.
"""

from __future__ import annotations

# A worker installs this as it starts (dashboard/celery.py): only a worker holds
# unacknowledged messages, and redis and kombu's transport load with it, not with Django.


def install() -> None:
    """Idempotent: patch kombu's Redis channel once per process."""
    import redis
    from kombu.transport import redis as kombu_redis

    connparams = kombu_redis.Channel._connparams
    if getattr(connparams, "guarded", False):
        return

    def _connparams_of_a_live_connection(self, asynchronous: bool = False) -> dict:
        transport = self.connection
        if transport is None or transport.client is None:
            raise redis.exceptions.ConnectionError("the broker connection is already closed")
        return connparams(self, asynchronous)

    _connparams_of_a_live_connection.guarded = True  # type: ignore[attr-defined]
    kombu_redis.Channel._connparams = _connparams_of_a_live_connection
