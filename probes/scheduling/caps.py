"""Caps on concurrent requests, shared by every worker through Redis.

Two caps apply to every probe: the provider's (Provider.max_concurrency requests at once,
across all workers and regions: rate-limit friendly) and the worker's
(settings.WORKER_MAX_CONCURRENT_PROBES probes at once: a client busy with too much
distorts what it measures). A probe takes both before its first request and holds them
to its last (probe_slots). A third holds one endpoint to one probe at a time, across
workers and regions (endpoint_turn): two of our probes of one endpoint at once would each
measure it slower than it is; the planner lays them apart, and this turn holds where a slot
runs longer than planned. All are the same primitive, a counting semaphore whose slots are
leases: a sorted set of holder tokens scored by their expiry. Each token names the
worker holding it, so the slots of a worker killed with SIGKILL (which never releases
them) are freed as soon as it is known dead: when the sweeper sees its heartbeat gone,
or when it starts again under the same name (`make run` restarting it). Otherwise the
lease (the provider's total timeout and a minute) would hold them that long.

A 429 backs the whole provider off until its `retry-after` has passed
(Provider.backoff_until, in the database so the admin shows it).
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from django.conf import settings

from probes.models import Provider
from probes.platform.redis_client import redis_client
from probes.scheduling import waiting

log = logging.getLogger(__name__)

PREFIX = "inferwatch:sem"
# Between the holder's name and the random part of a token; never in a Celery node name.
HOLDER_SEP = "|"
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

    def acquire(self, client: redis.Redis, holder: str = "") -> str | None:
        """A token if a slot was free (hold it for at most lease_s), else None.

        `holder` (a worker's name) goes into the token so release_worker_slots finds it.
        """
        token = f"{holder}{HOLDER_SEP}{uuid.uuid4().hex}"
        now = time.time()
        got = client.eval(_ACQUIRE, 1, self.key, now, now + self.lease_s, self.limit, token)
        return token if got else None

    def release(self, client: redis.Redis, *tokens: str) -> None:
        client.zrem(self.key, *tokens)

    def holders(self, client: redis.Redis) -> int:
        return client.zcount(self.key, time.time(), "+inf")


def provider_semaphore(provider: Provider, rounds: int = 1) -> Semaphore:
    # A lease outlives the longest run of `rounds` requests in turn the provider's limits
    # allow (a group holds its slots from its first request to its last).
    return Semaphore(
        f"{PREFIX}:provider:{provider.pk}",
        provider.max_concurrency,
        rounds * (provider.total_timeout_s + provider.connect_timeout_s) + 60,
    )


def endpoint_semaphore(endpoint_id: int, lease_s: float) -> Semaphore:
    return Semaphore(f"{PREFIX}:endpoint:{endpoint_id}", 1, lease_s)


def _worker_key(worker: str) -> str:
    return f"{PREFIX}:worker:{worker}"


def worker_semaphore(worker: str, lease_s: float) -> Semaphore:
    return Semaphore(_worker_key(worker), settings.WORKER_MAX_CONCURRENT_PROBES, lease_s)


def release_worker_slots(worker: str, client: redis.Redis | None = None) -> int:
    """Free every slot `worker` holds, its own cap's and providers': call it only when
    that worker is dead. Returns how many were freed."""
    client = client or redis_client()
    freed = client.zcard(_worker_key(worker))
    client.delete(_worker_key(worker))
    mine = f"{worker}{HOLDER_SEP}"
    for shared in ("provider", "endpoint"):
        for key in client.scan_iter(match=f"{PREFIX}:{shared}:*", count=500):
            held = [token for token in client.zrange(key, 0, -1) if token.startswith(mine)]
            if held:
                freed += client.zrem(key, *held)
    return freed


def workers_holding_slots(client: redis.Redis) -> set[str]:
    """Names of the workers with a slot of their own cap taken (expired leases aside)."""
    prefix = _worker_key("")
    return {
        key.removeprefix(prefix)
        for key in client.scan_iter(match=prefix + "*", count=500)
        if client.zcount(key, time.time(), "+inf")
    }


def release_silent_workers(
    beats: dict[str, datetime], silent_since: datetime, client: redis.Redis | None = None
) -> dict[str, int]:
    """Free the slots of every worker whose last heartbeat (`beats`) is older than
    `silent_since`: it stopped beating, so it is dead. Returns the slots freed per worker.

    A holder with no heartbeat at all is left to its lease: the admin's "Run now" holds
    slots under a name that never beats (and a worker's beat outlives its death by
    heartbeat.TTL_S, ten sweeps)."""
    client = client or redis_client()
    freed = {}
    for worker in workers_holding_slots(client):
        if worker in beats and beats[worker] < silent_since:
            freed[worker] = release_worker_slots(worker, client)
    return freed


class Busy(Exception):
    """No slot free (now, or within the time the slot could wait): `reason` names the cap
    and who holds it."""

    def __init__(self, which: str, reason: str = "") -> None:
        self.which = which
        self.reason = reason or f"{which} is at its concurrency cap"
        super().__init__(self.reason)


Stopped = waiting.Stopped


@dataclass(frozen=True)
class Wait:
    """How a scheduled slot waits for its caps: in turn (probes/scheduling/waiting.py)
    until `until` (Unix seconds: its lateness budget), unless `stopping()` says its worker
    is shutting down. `label` names the probe to those waiting behind it."""

    until: float
    label: str = ""
    stopping: Callable[[], bool] = lambda: False


def _release_quietly(sem: Semaphore, client: redis.Redis, *tokens: str) -> None:
    # Redis away as a run ends: it is measured and recorded all the same; its leases expire.
    with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
        sem.release(client, *tokens)


# Redis did not answer until the slot's last moment to start: skipped, nothing sent (a
# probe never runs past its provider's cap unchecked). Raised as it is from the waits.
CapsAway = waiting.CapsAway


class TooNarrow(Exception):
    """A group needs more concurrent requests than the provider's cap allows: it can
    never run until the cap is raised (not a reason to retry)."""


def check_width(provider: Provider, n: int) -> None:
    if n > provider.max_concurrency:
        raise TooNarrow(
            f"{n} concurrent requests need {provider.slug}'s max concurrency raised from "
            f"{provider.max_concurrency} to at least {n}"
        )


def _acquire_many(client: redis.Redis, sem: Semaphore, n: int, holder: str) -> list[str] | None:
    tokens: list[str] = []
    for _ in range(n):
        token = sem.acquire(client, holder)
        if token is None:
            for held in tokens:
                sem.release(client, held)
            return None
        tokens.append(token)
    return tokens


@contextmanager
def probe_slots(
    provider: Provider,
    worker: str,
    width: int = 1,
    rounds: int = 1,
    client: redis.Redis | None = None,
    wait: Wait | None = None,
    endpoint_id: int | None = None,
) -> Iterator:
    """Hold what one probe needs for all its requests, or raise Busy before any is sent.

    Without `wait` (the admin's *Run now*) a full cap raises Busy at once; with it, the
    slot waits its turn until wait.until, then raises Busy naming the cap and its
    holders, or Stopped if its worker is shutting down first.

    A probe's requests (one; a group's steps in turn; a parallel batch of ``width`` at
    once) are all measured inside, never asking a cap again: a group that found a cap
    full halfway would be retried with its first requests recorded, and a group cannot
    be resumed (a loop needs its answers, a batch its baseline's moment). So the provider's
    slots cover the widest step, from the first request to the last (a parallel group's
    baseline runs with its batch's slots already taken), and ``rounds`` (requests one
    after another) stretches the leases to the whole group.

    The worker's cap counts probes, not streams: one slot per probe, however many
    requests it sends at once. WORKER_MAX_CONCURRENT_PROBES is the worker's pool size
    (its threads: probes/platform/worker_pool.py), every probe of the worker streaming on the
    process's one event loop, a parallel probe's N streams too; how many a provider sees
    at once is its own cap's business. (Counting streams instead made a
    parallel group wider than the worker wait for the whole worker to be idle, which a
    busy worker never is.) Runs near the worker's own ceiling are flagged client_bound.

    With ``endpoint_id``, the endpoint's turn is taken first (endpoint_turn), so no other
    probe of it runs meanwhile; then the provider's and the worker's caps.
    """
    check_width(provider, width)
    client = client or redis_client()
    per_provider = provider_semaphore(provider, rounds)
    with (
        endpoint_turn(client, endpoint_id, worker, per_provider.lease_s, wait),
        _provider_and_worker(client, provider, worker, width, per_provider, wait),
    ):
        yield


@contextmanager
def endpoint_turn(
    client: redis.Redis,
    endpoint_id: int | None,
    worker: str,
    lease_s: float,
    wait: Wait | None = None,
) -> Iterator:
    """Hold the endpoint's one turn (None: no endpoint, nothing held): at once, else Busy;
    with `wait`, in turn (first come, first served) until wait.until, then Busy naming the
    probe that holds it (or Stopped). Waiting holds nothing else: the provider's and the
    worker's caps are taken after it."""
    if endpoint_id is None:
        yield
        return
    sem = endpoint_semaphore(endpoint_id, lease_s)
    if wait is None:
        token = sem.acquire(client, worker)
        if token is None:
            raise Busy("this endpoint", waiting.describe(client, "endpoint", sem, "turn"))
    else:
        # The process in the holder's name: a prefork child killed mid-probe (which
        # never releases) leaves a turn its own worker frees as its next slot asks.
        holder = f"{worker}{HOLDER_SEP}{waiting.clean_label(wait.label)} pid {os.getpid()}"
        _free_turns_of_dead_processes(client, sem, worker)
        try:
            token = waiting.wait_for_one(
                client, sem, holder, wait.until, wait.stopping, "endpoint", "turn"
            )
        except waiting.CapFull as full:
            raise Busy("this endpoint", str(full)) from None
    try:
        yield
    finally:
        _release_quietly(sem, client, token)


def _free_turns_of_dead_processes(client: redis.Redis, sem: Semaphore, worker: str) -> None:
    """Free the turns `worker` (this host's) holds under a process that is gone."""
    mine = f"{worker}{HOLDER_SEP}"
    with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
        for token in client.zrange(sem.key, 0, -1):
            pid = re.search(r" pid (\d+)", token) if token.startswith(mine) else None
            if pid and not _alive(int(pid.group(1))):
                client.zrem(sem.key, token)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


@contextmanager
def _provider_and_worker(
    client: redis.Redis,
    provider: Provider,
    worker: str,
    width: int,
    per_provider: Semaphore,
    wait: Wait | None,
) -> Iterator:
    per_worker = worker_semaphore(worker, per_provider.lease_s)
    if wait is not None:
        holder = f"{worker}{HOLDER_SEP}{waiting.clean_label(wait.label)}"
        try:
            tokens = waiting.wait_for_slots(
                client, per_provider, per_worker, width, holder, wait.until, wait.stopping,
                provider.slug,
            )  # fmt: skip
        except waiting.CapFull as full:
            raise Busy(f"provider {provider.slug}", str(full)) from None
        try:
            yield
        finally:
            _release_quietly(per_provider, client, *tokens[:-1])
            _release_quietly(per_worker, client, tokens[-1])
        return
    worker_token = per_worker.acquire(client, worker)
    if worker_token is None:
        raise Busy("this worker")
    try:
        provider_tokens = _acquire_many(client, per_provider, width, worker)
        if provider_tokens is None:
            raise Busy(f"provider {provider.slug}")
        try:
            yield
        finally:
            for token in provider_tokens:
                per_provider.release(client, token)
    finally:
        per_worker.release(client, worker_token)


class BackingOff(Exception):
    def __init__(self, until: datetime) -> None:
        super().__init__(f"provider backing off until {until.isoformat()}")
        self.until = until


def hold(
    provider: Provider,
    worker: str,
    footprint: Any,
    first: Any,
    stages: Sequence[Callable[[Any], Any]],
    wait: Wait | None = None,
    endpoint_id: int | None = None,
) -> Any:
    """The slot's caps stage (probes/slots/): hold ``footprint`` (its ``width`` streams
    for ``rounds`` requests in turn; None: nothing will be sent, so no slot), and the turn
    of ``endpoint_id`` (one probe of an endpoint at a time), while the
    ``stages`` below run in turn, each reading what the one before returned, starting
    from ``first``; return the last one's value.

    Raises BackingOff (the provider asked us to wait), TooNarrow, Busy or Stopped before
    any stage runs. A last value saying ``rate_limited`` backs the provider off by its
    ``retry_after_s``. What the stages do is theirs: this module never imports them.
    """
    until = backing_off_until(provider)
    if until:
        raise BackingOff(until)
    value = first
    if footprint is None:
        for stage in stages:
            value = stage(value)
    else:
        with probe_slots(
            provider, worker, footprint.width, footprint.rounds, wait=wait, endpoint_id=endpoint_id
        ):
            for stage in stages:  # Busy was raised before: nothing sent
                value = stage(value)
    if getattr(value, "rate_limited", False):
        back_off(provider, value.retry_after_s)
        log.info("%s: 429, backing off %s", provider.slug, provider.backoff_until)
    return value


# -- 429 back-off ---------------------------------------------------------------------------


def back_off(provider: Provider, retry_after_s: float | None, now: datetime | None = None) -> None:
    """Hold the provider's probes until its retry-after has passed (never shortens one)."""
    now = now or datetime.now(UTC)
    # The engine hands over a finite, clamped retry-after; a caller that does not still
    # gets the default rather than a NaN that timedelta cannot take.
    wait = DEFAULT_BACKOFF_S
    if retry_after_s is not None and math.isfinite(retry_after_s):
        wait = retry_after_s
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
