"""/metrics/alerts.json: alert episodes as Grafana annotations (the shipped dashboard's
annotation query, dashboard/grafana/), one object per episode with its start and end.

Same access as /metrics (the scraper's bearer token opens it under REQUIRE_LOGIN).
Only names and figures leave: no rule target, no notification channel.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from dashboard.alerts.models import AlertEvent

DEFAULT_SPAN = timedelta(days=7)
MAX_EVENTS = 1000


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
    # Episodes that overlap [start, end]: begun before its end, not resolved before its start.
    events = (
        AlertEvent.objects.filter(started_at__lte=end)
        .exclude(resolved_at__lt=start)
        .select_related("endpoint__provider", "workload")
        .order_by("-started_at")[:MAX_EVENTS]
    )
    return JsonResponse([as_annotation(e) for e in events], safe=False)
