"""/status: is every part of Inferwatch running? HTML for people, JSON for monitors,
always 200 with the state in its body (a scheduling mistake must not take a site down
behind a load balancer). /healthz (liveness: the process serves) and /readyz (database
and Redis answer) give the status codes load balancers and orchestrators act on."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import select_template
from django.views.decorators.cache import never_cache

from dashboard.shared_result import SharedResult
from dashboard.status.checks import FAIL, OK, as_dict, check_database, check_redis, run_checks
from probes.platform.redis_client import redis_client

_anonymous_report: SharedResult[dict] = SharedResult()


def _is_staff(request: HttpRequest) -> bool:
    # No session cookie, no session lookup: /status must answer when the database is down.
    if settings.SESSION_COOKIE_NAME not in request.COOKIES:
        return False
    try:
        return request.user.is_active and request.user.is_staff
    except DatabaseError:
        return False


def _may_see_details(staff: bool) -> bool:
    """Staff only (the details name the database, hosts, queues, workers and key problems),
    unless STATUS_PUBLIC_DETAILS opens them on a site without REQUIRE_LOGIN (the default
    outside production). Anonymous monitors still get ok / fail and the status code."""
    return staff or (settings.STATUS_PUBLIC_DETAILS and not settings.REQUIRE_LOGIN)


@never_cache
def status(request: HttpRequest, as_json: bool = False) -> HttpResponse:
    # Who is asking is decided first, before anything costly runs: staff get fresh checks;
    # everyone else one shared report per PUBLIC_SURFACE_CACHE_S, however fast they poll.
    staff = _is_staff(request)
    if staff:
        report = as_dict(run_checks())
    else:
        report = _anonymous_report.get(
            settings.PUBLIC_SURFACE_CACHE_S, lambda: as_dict(run_checks())
        )
    # 200 whatever the state: the body says ok / warn / fail. A monitor alerts on the
    # body; a load balancer points at /readyz, which fails only when this process
    # cannot serve pages (a late worker or an over-full plan is not a reason to stop).
    if not _may_see_details(staff):
        report = {"status": report["status"], "checked_at": report["checked_at"]}
    if as_json or request.GET.get("format") == "json":
        return JsonResponse(report)
    # The site's layout when the pages app provides one; a standalone page otherwise.
    base = select_template(["base.html", "status/standalone.html"])
    return render(request, "status/status.html", {"report": report, "base": base})


@never_cache
def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness: this process answers HTTP. Touches neither the database nor Redis, so a
    restart is never ordered for a dependency's outage."""
    return JsonResponse({"status": OK})


READY_CACHE_S = 2.0  # a load balancer learns of an outage at most this much later
_readiness: SharedResult[list] = SharedResult()


def _ready_checks() -> list:
    client = redis_client(timeout_s=1.0)
    try:
        return [check_database(), check_redis(client)]
    finally:
        client.close()


@never_cache
def readyz(request: HttpRequest) -> HttpResponse:
    """Readiness: the database and Redis answer (what every page needs); 503 otherwise,
    so a load balancer sends visitors elsewhere. Names and states only: the messages
    (hosts, database names) are /status's details, for staff."""
    # One check per READY_CACHE_S per process, however many poll (an open endpoint:
    # a flood must not become a flood of database and Redis connections).
    ttl = min(settings.PUBLIC_SURFACE_CACHE_S, READY_CACHE_S)
    checks = _readiness.get(ttl, _ready_checks)
    ready = all(c.state != FAIL for c in checks)
    response = JsonResponse(
        {"status": OK if ready else FAIL, "checks": {c.name: c.state for c in checks}},
        status=200 if ready else 503,
    )
    # Down is what this answers, not an error of the view: no ERROR log line per poll.
    response._has_been_logged = True
    return response
