"""Server errors (5xx) the site answered, counted in Redis per minute so every web process
adds to one count and /status can say the public site is failing while the database and
Redis answer (a view that raises on some catalog data leaves /readyz green)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from probes.platform.redis_client import redis_client

log = logging.getLogger(__name__)

# How far back /status looks: long enough that a poll every minute or two sees an error,
# short enough that a fixed page turns /status ok again soon after.
WINDOW = timedelta(minutes=10)
_COUNT_KEY = "inferwatch:server-errors:{minute}"
_LAST_KEY = "inferwatch:server-errors:last"
# Health answers report on the services, not on the pages: /readyz answers 503 by design.
NOT_COUNTED = ("/status", "/healthz", "/readyz", "/static/")


def _minute(at: datetime) -> str:
    return at.strftime("%Y%m%d%H%M")


def record(path: str, status: int, at: datetime) -> None:
    """Count one 5xx answer, and keep the latest one's path (never its query: it may
    carry what a visitor typed) and status. Best effort: a Redis outage must not turn
    one error page into two."""
    try:
        client = redis_client(timeout_s=0.5)
        with client.pipeline() as pipe:
            key = _COUNT_KEY.format(minute=_minute(at))
            pipe.incr(key)
            pipe.expire(key, int(WINDOW.total_seconds()) + 120)
            pipe.set(_LAST_KEY, f"{at.isoformat()} {status} {path[:200]}", ex=86400)
            pipe.execute()
        client.close()
    except Exception as exc:  # noqa: BLE001 - counting must never fail the answer
        log.warning("could not count a server error in Redis: %s", type(exc).__name__)


@dataclass(frozen=True)
class Recent:
    count: int
    last_at: str = ""
    last_status: str = ""
    last_path: str = ""


def recent(client, now: datetime) -> Recent:
    """5xx answers in the last WINDOW, with the latest one's time, status and path."""
    minutes = int(WINDOW.total_seconds() // 60)
    keys = [_COUNT_KEY.format(minute=_minute(now - timedelta(minutes=i))) for i in range(minutes)]
    count = sum(int(n) for n in client.mget(keys) if n)
    if not count:
        return Recent(0)
    at, status, path = ((client.get(_LAST_KEY) or "") + "  ").split(" ", 2)
    return Recent(count, at, status, path.strip())


class CountServerErrors:
    """Middleware: count every 5xx answer outside the health routes (server_errors)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code >= 500 and not request.path.startswith(NOT_COUNTED):
            record(request.path, response.status_code, datetime.now(UTC))
        return response
