"""Outcomes a worker decided while the database was away: a slot taken on the worker's
last reads (tasks._taken_offline) and then skipped (its endpoint busy, a maintenance
window, too late) cannot say so on the ledger. Kept in Redis instead, the sweeper closes
its row with them (ledger.settle) rather than waiting for a run that never comes and then
calling the slot lost."""

from __future__ import annotations

import contextlib
import json

import redis

from probes.platform.redis_client import redis_client, values_under

PREFIX = "inferwatch:slots:skipped-offline:"
KEEP_S = 2 * 3600


def keep_skip(name: str, code: str, reason: str) -> None:
    """Keep the skip of the slot `name` (ledger.offline_slot); never raises."""
    # Redis away too: the sweeper's patience runs out, then lost naming the database.
    with contextlib.suppress(redis.RedisError):
        redis_client().set(PREFIX + name, json.dumps([code, reason]), ex=KEEP_S)


def kept_skips(client: redis.Redis | None = None) -> dict[str, tuple[str, str]]:
    """Every kept skip by slot name. Raises redis.RedisError."""
    kept = values_under(client or redis_client(), PREFIX)
    return {name: tuple(json.loads(value)) for name, value in kept.items()}
