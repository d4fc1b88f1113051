"""Rate limits per client address, counted in Redis so every web process shares them.

Two budgets: every page and API request (RATE_LIMIT_PER_MINUTE), and sign-in attempts,
POSTs to /admin/login/ (LOGIN_ATTEMPTS_PER_HOUR) so a password cannot be guessed at the
speed of the server. Static files, /status and /metrics are not counted.
Beyond a budget the answer is 429 with Retry-After, the seconds until the window ends.

Fixed windows: one INCR and one EXPIRE per request, in one round trip. The client is the
connection's address, or, from a TRUSTED_PROXIES peer, the nearest X-Forwarded-For
address that is not one of those proxies (a client cannot pick its own bucket by sending
the header). When Redis cannot be reached, each process counts in its own memory instead
(the same windows and budgets, per process): a Redis outage neither takes the site down
(closed) nor opens it to unlimited requests and password guessing (open).
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from dataclasses import dataclass
from functools import cache

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from dashboard.middleware import bearer_token_ok
from probes.platform.redis_client import redis_client

log = logging.getLogger(__name__)

_KEY = "inferwatch:ratelimit:{bucket}:{client}:{window}"
# Static files cost nothing; /status and /metrics are polled by load balancers, uptime
# monitors and Prometheus, which must never read a 429 as "down" (each shares one answer
# among anonymous callers: a flood costs one per period). /metrics/alerts.json takes any
# window a caller names, so a caller without the scraper's token is counted.
_NOT_COUNTED = ("/static/", "/status", "/healthz", "/readyz", "/metrics")
_COUNTED_UNLESS_TOKEN = ("/metrics/alerts.json",)


@dataclass(frozen=True)
class Budget:
    bucket: str
    limit: int  # requests per window; 0 means no limit
    window_s: int


def budget_for(request: HttpRequest) -> Budget | None:
    if request.path in _COUNTED_UNLESS_TOKEN:
        if bearer_token_ok(request):
            return None
    elif request.path.startswith(_NOT_COUNTED):
        return None
    if request.method == "POST" and request.path == "/admin/login/":
        return Budget("login", settings.LOGIN_ATTEMPTS_PER_HOUR, 3600)
    return Budget("site", settings.RATE_LIMIT_PER_MINUTE, 60)


def client_address(request: HttpRequest) -> str:
    peer = request.META.get("REMOTE_ADDR", "")
    if not _trusted(peer):
        return peer
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    # Right to left: each proxy appends the address it saw; the first untrusted one is
    # the client as far as anyone we trust can tell.
    for hop in reversed([h.strip() for h in forwarded.split(",") if h.strip()]):
        if not _trusted(hop):
            return hop
    return peer


def _trusted(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in settings.TRUSTED_PROXIES)


@cache
def _redis(url: str) -> redis.Redis:
    # One pool per process: a connection per request would cost more than the limit saves.
    return redis_client(url, timeout_s=0.5)


def hit(budget: Budget, client: str, now: float | None = None) -> int | None:
    """Count one request; the seconds to wait when it is over the budget, else None."""
    now = time.time() if now is None else now
    window = int(now // budget.window_s)
    key = _KEY.format(bucket=budget.bucket, client=client, window=window)
    try:
        pipe = _redis(settings.REDIS_URL).pipeline(transaction=False)
        pipe.incr(key)
        pipe.expire(key, budget.window_s + 1)
        count, _ = pipe.execute()
    except redis.RedisError as exc:
        log.warning("rate limit counted in this process, Redis unreachable: %s", exc)
        count = _local_hit(key, (window + 1) * budget.window_s, now)
    if count <= budget.limit:
        return None
    return max(1, math.ceil((window + 1) * budget.window_s - now))


# The in-process fallback: key (its window in it) -> (when the window ends, count).
_local: dict[str, tuple[float, int]] = {}
_local_lock = threading.Lock()
_LOCAL_MAX_KEYS = 100_000  # a flood of addresses cannot grow it without bound


def _local_hit(key: str, ends_at: float, now: float) -> int:
    with _local_lock:
        if len(_local) >= _LOCAL_MAX_KEYS:  # ended windows first, then the oldest half
            ended = [k for k, (end, _) in _local.items() if end <= now]
            for k in ended or list(_local)[: _LOCAL_MAX_KEYS // 2]:
                del _local[k]
        count = _local.get(key, (ends_at, 0))[1] + 1
        _local[key] = (ends_at, count)
        return count


def too_many(request: HttpRequest, retry_after: int, budget: Budget) -> HttpResponse:
    what = "sign-in attempts" if budget.bucket == "login" else "requests"
    text = f"Too many {what} from your address: try again in {retry_after} s."
    if request.path.startswith("/api/"):
        response: HttpResponse = JsonResponse({"error": text}, status=429)
    else:
        response = HttpResponse(text + "\n", status=429, content_type="text/plain")
    response["Retry-After"] = str(retry_after)
    return response


class RateLimit:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        budget = budget_for(request)
        if budget is not None and budget.limit > 0:
            retry_after = hit(budget, client_address(request))
            if retry_after is not None:
                return too_many(request, retry_after, budget)
        return self.get_response(request)
