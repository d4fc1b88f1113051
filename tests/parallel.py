"""Each pytest-xdist worker on its own Redis DB (pyproject's addopts loads this as a plugin).

pytest-django already gives each worker its own Postgres test database (test_…_gw0,
test_…_gw1). Redis has no such suffix, and the tests flush their DB between tests, so two
workers on one DB would empty each other's queues, caps and heartbeats mid-test. Worker
gwN uses the DB of CELERY_BROKER_URL (and REDIS_URL) plus N: the machine's Redis with the
default redis://127.0.0.1:6379/0 gives DBs 0 and 1 to two workers, an engineer's
…/13 gives 13 and 14.

This runs when pytest imports the plugin, before pytest-django loads the settings, and it
changes os.environ, so every Celery worker, beat or command a test starts inherits it.
Without xdist (or in xdist's controller, which runs no test) nothing changes.
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

DEFAULT_BROKER = "redis://127.0.0.1:6379/0"  # dashboard/settings.py's default
REDIS_DATABASES = 16  # redis-server's default `databases`


def worker_index(worker: str) -> int:
    """gw0 -> 0, gw1 -> 1 (xdist names its workers so)."""
    match = re.fullmatch(r"gw(\d+)", worker)
    if not match:
        raise pytest.UsageError(f"unexpected PYTEST_XDIST_WORKER={worker!r}")
    return int(match[1])


def url_database(url: str) -> int:
    """The DB number a Redis URL names: its path (redis://), its db or virtual_host query
    (unix://, redis+socket://), else 0."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if parts.scheme in ("redis", "rediss"):
        return int(parts.path.strip("/") or query.get("db", 0))
    return int(query.get("db", query.get("virtual_host", 0)))


def with_database(url: str, db: int) -> str:
    """`url` naming DB `db`, in the spelling its client reads: the path for redis://, `db`
    for redis-py's unix://, `virtual_host` for Celery's redis+socket://."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if parts.scheme in ("redis", "rediss"):
        query.pop("db", None)
        return urlunsplit(parts._replace(path=f"/{db}", query=urlencode(query)))
    key = "virtual_host" if parts.scheme == "redis+socket" else "db"
    query.pop("db" if key == "virtual_host" else "virtual_host", None)
    # By hand: urlunsplit drops the empty host of scheme:///path.
    return f"{parts.scheme}://{parts.netloc}{parts.path}?{urlencode({**query, key: db})}"


def worker_urls(environ: dict[str, str], index: int) -> dict[str, str]:
    """CELERY_BROKER_URL and REDIS_URL for worker `index`. The app reads REDIS_URL with
    redis-py, which does not read Celery's redis+socket:// spelling of a DB."""
    broker = environ.get("CELERY_BROKER_URL", DEFAULT_BROKER)
    redis_url = environ.get("REDIS_URL", broker)
    urls = {}
    for name, url in (("CELERY_BROKER_URL", broker), ("REDIS_URL", redis_url)):
        db = url_database(url) + index
        if db >= REDIS_DATABASES:
            raise pytest.UsageError(
                f"xdist worker gw{index} would use Redis DB {db} ({name}={url} plus {index}); "
                f"Redis has {REDIS_DATABASES}: start from a lower DB or run fewer workers (-n)."
            )
        if url.startswith("redis+socket://") and name == "REDIS_URL":
            url = "unix://" + url.removeprefix("redis+socket://")
        urls[name] = with_database(url, db)
    return urls


_worker = os.environ.get("PYTEST_XDIST_WORKER")  # set by xdist before a worker imports us
if _worker:
    os.environ.update(worker_urls(dict(os.environ), worker_index(_worker)))
