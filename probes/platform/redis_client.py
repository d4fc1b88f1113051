"""The one way every process reaches Redis outside Celery (heartbeats, concurrency
slots, the run spool, /status), below both apps so probes and dashboard share it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    import redis


def redis_client(
    url: str | None = None, timeout_s: float = 2.0, *, decode: bool = True
) -> redis.Redis:
    """A client for REDIS_URL, with short timeouts so a dead Redis fails fast.

    Accepts Celery's `redis+socket:///path` spelling of a unix socket as well as redis-py's.
    ``decode=False`` returns bytes (the run spool: an item that is not UTF-8 must still
    be readable, to be set aside).
    """
    import redis  # with the first client, not with Django: most commands never need one

    url = url or settings.REDIS_URL
    if url.startswith("redis+socket://"):
        url = "unix://" + url.removeprefix("redis+socket://")
    return redis.Redis.from_url(
        url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=decode
    )


def values_under(client: redis.Redis, prefix: str) -> dict[str, str]:
    """Every key under `prefix` (the rest of its name) with its value, read in one MGET;
    keys that expired between the scan and the read are left out. Raises redis.RedisError."""
    keys = sorted(client.scan_iter(match=prefix + "*", count=500))
    values = client.mget(keys) if keys else []
    return {
        key.removeprefix(prefix): value
        for key, value in zip(keys, values, strict=True)
        if value is not None
    }
