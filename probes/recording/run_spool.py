"""Runs waiting for the database: a Redis list, and the worker's disk when Redis is away too.

``spool`` keeps a run the database could not take (probes/recording/recorder.py retried it first):
in the Redis list SPOOL_KEY, or, when Redis is away as well, as one file per run in
RUN_SPOOL_DIR on the worker's own disk. ``drain_spool`` writes them back in order: the
disk files first (to the database, or to Redis while the database is still away), then
the list. It runs after every successful write, every minute from the rollup task, and a
worker's timer moves its disk files to Redis as soon as Redis answers.

No item can block the ones behind it: one that cannot be written for any reason but the
connection (oversize, undecodable, JSON that is not an object, a row whose stand-in is
refused too) is set aside at once on SPOOL_REJECTED_KEY, with why, for a human (/status
shows them). Nothing is dropped silently.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection

from probes.models import ProbeRun
from probes.platform.redis_client import redis_client
from probes.recording.run_rows import insert_or_stand_in, is_connection_error, refused_row

log = logging.getLogger(__name__)

SPOOL_KEY = "inferwatch:spool:runs"
SPOOL_REJECTED_KEY = "inferwatch:spool:runs:rejected"  # kept for a human to look at
# A run is a few KiB (its timeline is compact by construction, probes/engine/metrics.py):
# an item past this is not a run we made, or one no database write should carry.
SPOOL_ITEM_MAX_BYTES = 4 * 1024 * 1024
REJECTED_KEPT = 1000  # the newest set-aside items; older ones are trimmed
_REJECTED_ITEM_KEPT = 64 * 1024  # of an oversize item, this much is kept to look at


class SpoolItemError(ValueError):
    """A spooled item that can never become a row (not a run's JSON object)."""


# -- encoding -------------------------------------------------------------------------------


class _SpoolEncoder(DjangoJSONEncoder):
    # DjangoJSONEncoder cuts datetimes to milliseconds; slot_at is part of a run's unique
    # key (and matches its ledger row), so a spooled run must keep it to the microsecond.
    def default(self, o: Any) -> Any:
        if isinstance(o, datetime):
            return o.isoformat()
        return super().default(o)


def to_json(fields: dict[str, Any]) -> str:
    return json.dumps(fields, cls=_SpoolEncoder)


def from_json(item: bytes | str) -> dict[str, Any]:
    """The row fields of a spooled item; SpoolItemError when it is not a run."""
    if len(item) > SPOOL_ITEM_MAX_BYTES:
        raise SpoolItemError(_oversize(len(item)))
    try:
        raw = json.loads(item)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
        raise SpoolItemError(f"not JSON: {type(exc).__name__}: {exc}") from None
    if not isinstance(raw, dict):
        raise SpoolItemError(f"JSON {type(raw).__name__}, not an object")
    by_attname = {f.attname: f for f in ProbeRun._meta.concrete_fields}
    try:
        return {name: by_attname[name].to_python(value) for name, value in raw.items()}
    except KeyError as exc:
        raise SpoolItemError(f"unknown field {exc}") from None
    except ValidationError as exc:
        raise SpoolItemError(f"bad value: {exc}") from None


def _item_for(fields: dict[str, Any]) -> str:
    item = to_json(fields)
    if len(item) > SPOOL_ITEM_MAX_BYTES:
        # Keep the slot's run (its identity, as protocol_error) rather than a huge item.
        item = to_json(refused_row(fields, f"row of {len(item)} bytes, too large to spool"))
    return item


def _spool_client() -> redis.Redis:
    # Raw bytes: an item that is not UTF-8 must be readable to be set aside.
    return redis_client(decode=False)


# -- spooling -------------------------------------------------------------------------------


def spool(fields: dict[str, Any]) -> str:
    """Keep a run for later: "redis", or "disk" when Redis is away too."""
    item = _item_for(fields)
    try:
        _spool_client().rpush(SPOOL_KEY, item)
    except redis.RedisError as exc:
        log.error("Redis away too (%s); keeping the run on this worker's disk", exc)
        _write_file(item)
        return "disk"
    return "redis"


def spool_dir() -> Path:
    return Path(settings.RUN_SPOOL_DIR)


def _write_file(item: str) -> Path:
    """One run, one file, written whole before it appears under its final name."""
    directory = spool_dir()
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
    tmp = directory / f".{name}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(item)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / name)
    return directory / name


def disk_items() -> list[Path]:
    """The runs on this worker's disk, oldest first."""
    try:
        return sorted(spool_dir().glob("[0-9]*.json"))
    except OSError:
        return []


# -- setting aside --------------------------------------------------------------------------


def _rejected_entry(item: bytes | str, reason: str, size: int | None = None) -> str:
    """``size``: the whole item's, when ``item`` is only its first bytes."""
    text = item.decode("utf-8", "replace") if isinstance(item, bytes) else item
    size = len(item) if size is None else size
    return json.dumps(
        {
            "at": datetime.now(UTC).isoformat(),
            "reason": reason[:500],
            "bytes": size,
            # Oversize items are kept in part: enough to see what they were.
            "item": text[:_REJECTED_ITEM_KEPT] if size > SPOOL_ITEM_MAX_BYTES else text,
        }
    )


def _set_aside(
    client: redis.Redis, item: bytes, reason: str, size: int | None = None, remove: bool = True
) -> None:
    """Move a spooled item that can never be written out of the way of the good ones
    (``remove=False``: it is already off the spool, ``item`` only its first bytes)."""
    log.error("Spooled run cannot be written (%s); moved to %s", reason, SPOOL_REJECTED_KEY)
    pipe = client.pipeline()
    pipe.lpush(SPOOL_REJECTED_KEY, _rejected_entry(item, reason, size))
    pipe.ltrim(SPOOL_REJECTED_KEY, 0, REJECTED_KEPT - 1)
    if remove:
        pipe.lrem(SPOOL_KEY, 1, item)
    pipe.execute()


def _oversize(size: int) -> str:
    return f"item of {size} bytes (limit {SPOOL_ITEM_MAX_BYTES})"


def rejected(
    limit: int = 20, client: redis.Redis | None = None
) -> tuple[int, list[dict[str, Any]]]:
    """How many items are set aside, and the newest ``limit`` (reason, time, size)."""
    client = client or _spool_client()
    entries = []
    for raw in client.lrange(SPOOL_REJECTED_KEY, 0, limit - 1):
        try:
            entry = json.loads(raw)
            entries.append({k: entry.get(k) for k in ("at", "reason", "bytes")})
        except (ValueError, AttributeError):
            entries.append({"at": None, "reason": "unreadable entry", "bytes": len(raw)})
    return client.llen(SPOOL_REJECTED_KEY), entries


# -- draining -------------------------------------------------------------------------------


class _DatabaseAway(Exception):
    pass


_TO_REDIS = object()  # a disk item the database did not take (yet): Redis keeps it


def _write(item: bytes | str) -> str | None:
    """Write one item: None when written, else why it never can be.

    Raises _DatabaseAway on a connection failure (the item stays where it is).
    """
    try:
        insert_or_stand_in(from_json(item))  # idempotent: a twice-drained run is one row
    except SpoolItemError as exc:
        return str(exc)
    except Exception as exc:
        if is_connection_error(exc):
            connection.close()  # Django opens a new one on the next query
            raise _DatabaseAway from exc
        return f"{type(exc).__name__}: {exc}"
    return None


# The head of the spool, read only when it is small enough: an oversize head is popped
# inside Redis and only its first bytes come back (LINDEX of a 100 MB item cost the
# worker 582 MB of RSS before its size was even looked at).
_HEAD_SCRIPT = """
local item = redis.call('LINDEX', KEYS[1], 0)
if not item then return nil end
local size = string.len(item)
if size > tonumber(ARGV[1]) then
  redis.call('LTRIM', KEYS[1], 1, -1)
  return {size, string.sub(item, 1, tonumber(ARGV[2]))}
end
return {size, item}
"""
# Sizing a pathological item takes Redis a while (~1.5 s for 100 MB on a busy VM): the
# script's client waits longer than the usual fail-fast 2 s.
_HEAD_TIMEOUT_S = 30.0


def _head() -> tuple[int, bytes] | None:
    """(size, item) of the spool's head; an oversize one is already off the spool and
    ``item`` is its first bytes."""
    client = redis_client(timeout_s=_HEAD_TIMEOUT_S, decode=False)
    head = client.eval(_HEAD_SCRIPT, 1, SPOOL_KEY, SPOOL_ITEM_MAX_BYTES, _REJECTED_ITEM_KEPT)
    return None if head is None else (int(head[0]), head[1])


def _drain_redis(limit: int) -> int:
    client = _spool_client()
    drained = 0
    while drained < limit:
        head = _head()
        if head is None:
            break
        size, item = head
        if size > SPOOL_ITEM_MAX_BYTES:
            _set_aside(client, item, _oversize(size), size, remove=False)
            continue
        why = _write(item)
        if why is not None:
            _set_aside(client, item, why)
            continue
        client.lrem(SPOOL_KEY, 1, item)  # only after the row is in
        drained += 1
    return drained


def _drain_file(path: Path, database: bool) -> bool:
    """Write one disk item to the database (or to Redis); False when neither took it."""
    try:
        f = open(path, "rb")  # noqa: SIM115 (held open for its lock below)
    except FileNotFoundError:
        return True  # another process of this worker took it
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True  # being written by another process right now
        stat = os.fstat(f.fileno())
        if stat.st_nlink == 0:
            return True  # written and removed since we listed it
        if stat.st_size > SPOOL_ITEM_MAX_BYTES:  # sized before it is read, like Redis's
            item, size = f.read(_REJECTED_ITEM_KEPT), stat.st_size
            why: object = _oversize(size)
        else:
            item, size = f.read(SPOOL_ITEM_MAX_BYTES + 1), None
            try:
                why = _write(item) if database else _TO_REDIS
            except _DatabaseAway:
                why = _TO_REDIS
        if why is _TO_REDIS:
            try:
                _spool_client().rpush(SPOOL_KEY, item)
            except redis.RedisError:
                return False
        elif why is not None:
            try:
                _set_aside(_spool_client(), item, str(why), size, remove=False)
            except redis.RedisError:
                os.replace(path, path.with_suffix(".rejected"))  # kept on disk, out of line
                return True
        path.unlink()
    return True


def drain_disk(database: bool = True) -> int:
    """Move this worker's disk items to the database (or Redis); how many moved."""
    moved = 0
    for path in disk_items():
        if not _drain_file(path, database):
            break  # neither the database nor Redis: try again later, in order
        moved += 1
    if moved:
        log.info("Moved %d run(s) from this worker's disk spool", moved)
    return moved


def drain_spool(limit: int = 1000) -> int:
    """Write spooled runs to the database; how many from Redis. Safe to run concurrently.

    An item that cannot be written for any reason but the connection is set aside, never
    retried ahead of the runs behind it.
    """
    with contextlib.suppress(Exception):  # the disk is only this worker's fallback
        drain_disk()
    try:
        drained = _drain_redis(limit)
    except _DatabaseAway:
        log.warning("Database still away; spooled runs stay in Redis")
        return 0
    except Exception as exc:
        log.warning("Could not drain the run spool: %s", exc)
        return 0
    if drained:
        log.info("Wrote %d spooled runs", drained)
    return drained
