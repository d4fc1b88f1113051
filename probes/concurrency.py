"""Caps on concurrent requests, shared by every worker through Redis.

Two caps apply to every probe request: the provider's (Provider.max_concurrency, across
all workers and regions: rate-limit friendly) and the worker's
(settings.WORKER_MAX_CONCURRENT_PROBES: a client busy with too many streams distorts
what it measures). Both are the same primitive, a counting semaphore whose slots are
leases: a sorted set of holder tokens scored by their expiry. A worker killed with
SIGKILL never releases its slot; the lease simply runs out and the slot frees itself.

A 429 backs the whole provider off until its `retry-after` has passed
(Provider.backoff_until, in the database so the admin shows it).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import redis
from django.conf import settings

from dashboard.heartbeat import redis_client
from probes.models import Provider

PREFIX = "inferwatch:sem"
# Without a retry-after, a 429 backs the provider off this long.
DEFAULT_BACKOFF_S = 60.0
MAX_BACKOFF_S = 3600.0

# KEYS[1] the set; ARGV: now, lease expiry, limit, token. Drops expired leases, then
# takes a slot if one is free. Atomic in Redis, so two workers never both get the last.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
    redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
    redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[2] - ARGV[1]) + 60)
    return 1
end
return 0
"""


@dataclass(frozen=True)
class Semaphore:
    key: str
    limit: int
    lease_s: float

    def acquire(self, client: redis.Redis) -> str | None:
        """A token if a slot was free (hold it for at most lease_s), else None."""
        token = uuid.uuid4().hex
        now = time.time()
        got = client.eval(_ACQUIRE, 1, self.key, now, now + self.lease_s, self.limit, token)
        return token if got else None

    def release(self, client: redis.Redis, token: str) -> None:
        client.zrem(self.key, token)

    def holders(self, client: redis.Redis) -> int:
        return client.zcount(self.key, time.time(), "+inf")


def provider_semaphore(provider: Provider) -> Semaphore:
    # A lease outlives the longest request the provider's limits allow.
    return Semaphore(
        f"{PREFIX}:provider:{provider.pk}",
        provider.max_concurrency,
        provider.total_timeout_s + provider.connect_timeout_s + 60,
    )


def worker_semaphore(worker: str, lease_s: float) -> Semaphore:
    return Semaphore(f"{PREFIX}:worker:{worker}", settings.WORKER_MAX_CONCURRENT_PROBES, lease_s)


class Busy(Exception):
    """No slot free right now; try again shortly."""

    def __init__(self, which: str) -> None:
        super().__init__(f"{which} is at its concurrency cap")
        self.which = which


@contextmanager
def request_slot(provider: Provider, worker: str, client: redis.Redis | None = None) -> Iterator:
    """Hold one slot of the provider's cap and one of the worker's, or raise Busy."""
    client = client or redis_client()
    per_provider = provider_semaphore(provider)
    per_worker = worker_semaphore(worker, per_provider.lease_s)
    worker_token = per_worker.acquire(client)
    if worker_token is None:
        raise Busy("this worker")
    try:
        provider_token = per_provider.acquire(client)
        if provider_token is None:
            raise Busy(f"provider {provider.slug}")
        try:
            yield
        finally:
            per_provider.release(client, provider_token)
    finally:
        per_worker.release(client, worker_token)


# -- 429 back-off ---------------------------------------------------------------------------


def back_off(provider: Provider, retry_after_s: float | None, now: datetime | None = None) -> None:
    """Hold the provider's probes until its retry-after has passed (never shortens one)."""
    now = now or datetime.now(UTC)
    wait = DEFAULT_BACKOFF_S if retry_after_s is None else retry_after_s
    until = now + timedelta(seconds=min(max(wait, 1.0), MAX_BACKOFF_S))
    Provider.objects.filter(pk=provider.pk).exclude(backoff_until__gte=until).update(
        backoff_until=until
    )
    provider.backoff_until = max(provider.backoff_until or until, until)


def backing_off_until(provider: Provider, now: datetime | None = None) -> datetime | None:
    """When the provider may be probed again, if it is backing off now."""
    now = now or datetime.now(UTC)
    until = provider.backoff_until
    return until if until and until > now else None
