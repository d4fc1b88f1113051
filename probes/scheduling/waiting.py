"""Waiting fairly for the caps: a slot that finds its provider's or its worker's cap
full takes a ticket and waits its turn, first come first served, instead of retrying.

Each cap has a queue in Redis: a sorted set of tickets scored by arrival, beside a
sorted set of when each waiter last looked (a waiter that died stops looking and its
ticket is dropped after STALE_S). A waiter takes its slots only when its ticket heads the
queues of both caps it needs and both have room, in one Lua script, so two workers never
take the last slot and a wide parallel group is not starved by narrow probes slipping
past it. A ticket joins its worker's queue only once the provider could take it, so a
slot waiting for one provider never holds up another provider's slots on the same worker.
Such a ticket is *parked* on its provider (waiting for its own worker only): it keeps its
claim on the provider's room (tickets behind it take slots only if room is left for it
too) but no longer bars them, so a ticket stuck on a busy worker never holds back the
provider's free slots from the tickets of other workers (5.6 s with 4 free, before).
Waiting holds nothing: no cap slot, no connection, only a ticket.

The caller says until when it may wait (its lateness budget, probes/scheduling/lateness.py)
and how to know its worker is stopping; past the first it gets CapFull naming the cap and
who holds it, on the second Stopped, and never waits longer.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable

import redis

PREFIX = "inferwatch:wait"
# How often a waiter looks again (Redis round trips; the slot may start this much late).
POLL_S = 0.2
# How often a waiter asks again while Redis does not answer.
AWAY_POLL_S = 1.0
# A ticket whose waiter has not looked for this long is dropped (the waiter died).
STALE_S = 10.0
# Between a token's holder, its label and its random part (see caps.Semaphore).
SEP = "|"

# KEYS: provider queue, provider seen, provider semaphore, worker queue, worker seen,
# worker semaphore, provider parked (hash: ticket -> width). ARGV: now, ticket, arrival,
# stale before, provider limit, width, provider lease expiry, worker limit, worker lease
# expiry, token prefix, queue ttl.
# A ticket may go to its worker's queue when every ticket ahead of it on the provider is
# parked (waiting for its own worker) and the provider has room for them and for it: a
# slot waiting for one provider never holds up the worker's slots for another, and one
# waiting for its worker never holds up the provider's slots for other workers.
# Returns {1} when the slots were taken, else {0, provider rank, worker rank (-1: not in
# the worker's queue yet)}.
_TAKE = """
local now = tonumber(ARGV[1])
local function clean(queue, seen)
    for _, stale in ipairs(redis.call('ZRANGEBYSCORE', seen, '-inf', '(' .. ARGV[4])) do
        redis.call('ZREM', queue, stale)
        redis.call('ZREM', seen, stale)
        redis.call('HDEL', KEYS[7], stale)
    end
end
local function join(queue, seen)
    redis.call('ZADD', queue, 'NX', ARGV[3], ARGV[2])
    redis.call('ZADD', seen, now, ARGV[2])
    redis.call('EXPIRE', queue, ARGV[11])
    redis.call('EXPIRE', seen, ARGV[11])
    return redis.call('ZRANK', queue, ARGV[2])
end
clean(KEYS[1], KEYS[2])
clean(KEYS[4], KEYS[5])
if redis.call('ZSCORE', KEYS[4], ARGV[2]) then
    redis.call('ZADD', KEYS[5], now, ARGV[2])
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', now)
local width = tonumber(ARGV[6])
local provider_rank = join(KEYS[1], KEYS[2])
local reserved = 0
if provider_rank > 0 then
    for _, ahead in ipairs(redis.call('ZRANGE', KEYS[1], 0, provider_rank - 1)) do
        local parked = redis.call('HGET', KEYS[7], ahead)
        if not parked then
            redis.call('HDEL', KEYS[7], ARGV[2])
            return {0, provider_rank, -1}
        end
        reserved = reserved + tonumber(parked)
    end
end
if redis.call('ZCARD', KEYS[3]) + reserved + width > tonumber(ARGV[5]) then
    redis.call('HDEL', KEYS[7], ARGV[2])
    return {0, provider_rank, -1}
end
local worker_rank = join(KEYS[4], KEYS[5])
if worker_rank ~= 0 or redis.call('ZCARD', KEYS[6]) + 1 > tonumber(ARGV[8]) then
    redis.call('HSET', KEYS[7], ARGV[2], width)
    redis.call('EXPIRE', KEYS[7], ARGV[11])
    return {0, provider_rank, worker_rank}
end
for i = 1, width do
    redis.call('ZADD', KEYS[3], ARGV[7], ARGV[10] .. i)
end
redis.call('ZADD', KEYS[6], ARGV[9], ARGV[10] .. 'w')
redis.call('EXPIRE', KEYS[3], math.ceil(ARGV[7] - now) + 60)
redis.call('EXPIRE', KEYS[6], math.ceil(ARGV[9] - now) + 60)
for _, key in ipairs({KEYS[1], KEYS[2], KEYS[4], KEYS[5]}) do
    redis.call('ZREM', key, ARGV[2])
end
redis.call('HDEL', KEYS[7], ARGV[2])
return {1}
"""


# One cap alone (an endpoint's turn), first come first served: KEYS queue, seen,
# semaphore; ARGV now, ticket, arrival, stale before, limit, lease expiry, token, queue
# ttl. The ticket heading the queue takes a slot when one is free; 1 when taken, else 0.
_TAKE_ONE = """
local now = tonumber(ARGV[1])
for _, stale in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. ARGV[4])) do
    redis.call('ZREM', KEYS[1], stale)
    redis.call('ZREM', KEYS[2], stale)
end
redis.call('ZADD', KEYS[1], 'NX', ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[2], now, ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[8])
redis.call('EXPIRE', KEYS[2], ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('ZRANK', KEYS[1], ARGV[2]) ~= 0
    or redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then
    return 0
end
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[7])
redis.call('EXPIRE', KEYS[3], math.ceil(ARGV[6] - now) + 60)
redis.call('ZREM', KEYS[1], ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
"""


class CapFull(Exception):
    """The slot could not start in time: the message names the cap and its holders."""


class CapsAway(Exception):
    """Redis, which keeps the caps, did not answer until the slot's last moment to start:
    no cap could be checked, so nothing was sent (not a full cap: its own skip reason)."""


class Stopped(Exception):
    """The worker is stopping: the slot gives its turn up before it starts."""


def clean_label(label: str) -> str:
    return label.replace(SEP, "/")[:80]


def label_of(token: str) -> str:
    """The probe a token was taken for (`worker|label|random`), "" for older tokens."""
    parts = token.split(SEP)
    return parts[1] if len(parts) >= 3 else ""


def holders(client: redis.Redis, key: str) -> list[str]:
    """Who holds the cap's slots now, one label per slot."""
    return [label_of(t) or "a probe" for t in client.zrangebyscore(key, time.time(), "+inf")]


def describe(client: redis.Redis, what: str, sem, unit: str = "slots") -> str:
    """'provider busy: 1 of 1 slots held by code-refactor' (labels counted, not repeated)."""
    held = holders(client, sem.key)
    counts = Counter(held)
    names = ", ".join(f"{label} ×{n}" if n > 1 else label for label, n in counts.items())
    text = f"{what} busy: {len(held)} of {sem.limit} {unit}"
    return f"{text} held by {names}" if names else text


def _queues(sem) -> tuple[str, str]:
    name = sem.key.rsplit(":", 2)
    return f"{PREFIX}:{name[-2]}:{name[-1]}", f"{PREFIX}:{name[-2]}:{name[-1]}:seen"


def wait_for_slots(
    client: redis.Redis,
    provider_sem,
    worker_sem,
    width: int,
    holder: str,
    until: float,
    stopping: Callable[[], bool] = lambda: False,
    provider_name: str = "provider",
) -> list[str]:
    """Wait in turn for `width` slots of the provider's cap and one of the worker's, and
    take them; the tokens taken (release them through the semaphores). `until`: the
    latest time (Unix seconds) the slot may still start. Raises CapFull or Stopped."""
    ticket = f"{holder}{SEP}{uuid.uuid4().hex}"
    arrival = time.time()
    provider_queue, provider_seen = _queues(provider_sem)
    worker_queue, worker_seen = _queues(worker_sem)
    provider_parked = f"{provider_queue}:parked"
    keys = [
        provider_queue,
        provider_seen,
        provider_sem.key,
        worker_queue,
        worker_seen,
        worker_sem.key,
        provider_parked,
    ]
    prefix = f"{ticket}{SEP}"
    ttl = int(STALE_S * 6)
    away = _Away()  # Redis away: waited for as a full cap is, nothing sent unchecked
    try:
        while True:
            now = time.time()
            got = away.ask(
                client.eval,
                _TAKE, len(keys), *keys, now, ticket, arrival, now - STALE_S,
                provider_sem.limit, width, now + provider_sem.lease_s,
                worker_sem.limit, now + worker_sem.lease_s, prefix, ttl,
            )  # fmt: skip
            if got and got[0] == 1:
                return [f"{prefix}{i}" for i in range(1, width + 1)] + [f"{prefix}w"]
            if stopping():
                raise Stopped("stopped before it could start")
            if now + POLL_S > until:
                if got is None:
                    raise away.gave_up()
                raise CapFull(_why(client, got, provider_sem, worker_sem, provider_name))
            time.sleep(away.poll_s)
    finally:
        _leave(client, ticket, provider_parked, provider_queue, provider_seen)
        _leave(client, ticket, None, worker_queue, worker_seen)


class _Away:
    """Whether Redis answers a waiting slot, and since when it has not: a slot waits for
    it as for a full cap, and past its budget gives up with CapsAway."""

    def __init__(self) -> None:
        self.since: float | None = None

    def ask(self, call: Callable, *args):
        try:
            got = call(*args)
        except (redis.ConnectionError, redis.TimeoutError):
            self.since = self.since or time.time()
            return None
        self.since = None
        return got

    @property
    def poll_s(self) -> float:
        return AWAY_POLL_S if self.since else POLL_S

    def gave_up(self) -> CapsAway:
        away_s = time.time() - (self.since or time.time())
        return CapsAway(f"Redis, which keeps the caps, did not answer for {away_s:.0f} s")


def _leave(client: redis.Redis, ticket: str, parked: str | None, *queues: str) -> None:
    """Take the ticket out of the queues; with Redis away, STALE_S drops it later."""
    try:
        for key in queues:
            client.zrem(key, ticket)
        if parked:
            client.hdel(parked, ticket)
    except (redis.ConnectionError, redis.TimeoutError):
        pass


def _why(client: redis.Redis, got: list, provider_sem, worker_sem, provider_name: str) -> str:
    provider_rank, worker_rank = got[1], got[2]
    if worker_rank < 0:  # still waiting for the provider: its cap, or those ahead of it
        why = describe(client, f"provider {provider_name}", provider_sem)
        return why + (f", {provider_rank} earlier slot(s) waiting" if provider_rank else "")
    why = describe(client, "worker", worker_sem, "probe slots")
    return why + (f", {worker_rank} earlier slot(s) waiting" if worker_rank else "")


def wait_for_one(
    client: redis.Redis,
    sem,
    holder: str,
    until: float,
    stopping: Callable[[], bool] = lambda: False,
    what: str = "cap",
    unit: str = "slots",
) -> str:
    """Wait in turn for one slot of `sem` alone (an endpoint's turn) and take it; the
    token taken (release it through the semaphore). Raises CapFull or Stopped, as
    wait_for_slots does."""
    ticket = f"{holder}{SEP}{uuid.uuid4().hex}"
    token = f"{ticket}{SEP}t"
    arrival = time.time()
    queue, seen = _queues(sem)
    away = _Away()
    try:
        while True:
            now = time.time()
            got = away.ask(
                client.eval,
                _TAKE_ONE, 3, queue, seen, sem.key, now, ticket, arrival, now - STALE_S,
                sem.limit, now + sem.lease_s, token, int(STALE_S * 6),
            )  # fmt: skip
            if got == 1:
                return token
            if stopping():
                raise Stopped("stopped before it could start")
            if now + POLL_S > until:
                if got is None:
                    raise away.gave_up()
                ahead = client.zrank(queue, ticket) or 0
                why = describe(client, what, sem, unit)
                raise CapFull(why + (f", {ahead} earlier slot(s) waiting" if ahead else ""))
            time.sleep(away.poll_s)
    finally:
        _leave(client, ticket, None, queue, seen)
