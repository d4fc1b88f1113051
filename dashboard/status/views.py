"""/status: is every part of Inferwatch running? HTML for people, JSON for monitors."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import select_template
from django.views.decorators.cache import never_cache

from dashboard.shared_result import SharedResult
from dashboard.status.checks import FAIL, OK, as_dict, run_checks

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
    # 503 lets load balancers and uptime monitors see a failure without parsing the body.
    code = 503 if report["status"] == FAIL else 200
    if not _may_see_details(staff):
        report = {"status": FAIL if code == 503 else OK, "checked_at": report["checked_at"]}
    if as_json or request.GET.get("format") == "json":
        response = JsonResponse(report, status=code)
    else:
        # The site's layout when the pages app provides one; a standalone page otherwise.
        base = select_template(["base.html", "status/standalone.html"])
        response = render(
            request, "status/status.html", {"report": report, "base": base}, status=code
        )
    # A dependency being down is what this page reports, not an error of the page: skip
    # Django's ERROR log line (and mail to ADMINS) on every poll of an uptime monitor.
    response._has_been_logged = True
    return response
