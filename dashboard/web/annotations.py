"""/metrics/alerts.json: alert episodes as Grafana annotations (the shipped dashboard's
annotation query, dashboard/grafana/), one object per episode with its start and end.

Same access as /metrics (the scraper's bearer token opens it under REQUIRE_LOGIN).
Only names and figures leave: no rule target, no notification channel. Anonymous callers
share answers: the window is widened to whole minutes and each window's answer is kept
PUBLIC_SURFACE_CACHE_S (Grafana's refreshes ask for a window a few ms on); a caller naming
ever new windows is held by the rate limit (dashboard/ratelimit.py).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from dashboard.alerts.models import AlertEvent
from dashboard.middleware import bearer_token_ok
from dashboard.shared_result import SharedResult

DEFAULT_SPAN = timedelta(days=7)
MAX_EVENTS = 1000
_WINDOWS_KEPT = 64  # anonymous answers held at once, one per window (the oldest goes)
_anonymous: dict[tuple[datetime, datetime], SharedResult[list[dict]]] = {}


class BadRange(ValueError):
    pass


def _epoch_ms(value: str | None, name: str, default: datetime) -> datetime:
    if value in (None, ""):
        return default
    try:
        ms = int(value)
        return datetime.fromtimestamp(ms / 1000, UTC)
    except (ValueError, OverflowError, OSError):
        raise BadRange(
            f"{name} must be epoch milliseconds (Grafana's ${{__{name}}}), got {value!r}."
        ) from None


def _ms(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp() * 1000)


def as_annotation(event: AlertEvent) -> dict:
    endpoint = event.endpoint
    where = f"{endpoint.provider.slug} {endpoint.model_id} · {event.workload.slug} · {event.region}"
    return {
        "time": _ms(event.started_at),
        "timeEnd": _ms(event.resolved_at) or _ms(timezone.now()),
        "title": f"{event.rule_name} ({event.state})",
        "text": f"{event.condition_label} — {where}",
        "tags": [event.state, endpoint.provider.slug, endpoint.model_id, event.region],
        "state": event.state,
        "provider": endpoint.provider.slug,
        "endpoint": endpoint.model_id,
        "workload": event.workload.slug,
        "region": event.region,
    }


@require_safe
def alert_annotations(request: HttpRequest) -> JsonResponse:
    now = timezone.now()
    try:
        end = _epoch_ms(request.GET.get("to"), "to", now)
        start = _epoch_ms(request.GET.get("from"), "from", end - DEFAULT_SPAN)
    except BadRange as error:
        return JsonResponse({"error": str(error)}, status=400)
    if start > end:
        return JsonResponse({"error": "from is after to."}, status=400)
    if bearer_token_ok(request) or request.user.is_authenticated:
        return JsonResponse(_annotations(start, end), safe=False)
    start, end = _floor_minute(start), _floor_minute(end) + timedelta(minutes=1)
    shared = _anonymous.get((start, end))
    if shared is None:
        while len(_anonymous) >= _WINDOWS_KEPT:
            _anonymous.pop(next(iter(_anonymous)), None)
        shared = _anonymous.setdefault((start, end), SharedResult())
    body = shared.get(settings.PUBLIC_SURFACE_CACHE_S, lambda: _annotations(start, end))
    return JsonResponse(body, safe=False)


def _floor_minute(when: datetime) -> datetime:
    return when.replace(second=0, microsecond=0)


def _annotations(start: datetime, end: datetime) -> list[dict]:
    # Episodes that overlap [start, end]: begun before its end, not resolved before its start.
    events = (
        AlertEvent.objects.filter(started_at__lte=end)
        .exclude(resolved_at__lt=start)
        .select_related("endpoint__provider", "workload")
        .order_by("-started_at")[:MAX_EVENTS]
    )
    return [as_annotation(e) for e in events]
