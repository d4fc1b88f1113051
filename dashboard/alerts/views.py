from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from dashboard.alerts.detail import event_chart, runs_used
from dashboard.alerts.models import AlertEvent, Channel, Silence
from dashboard.alerts.queries import active_alerts, pending_alerts, recent_history


def index(request: HttpRequest) -> HttpResponse:
    """Firing alerts first, then pending ones, active silences, and the last 30 days."""
    return render(
        request,
        "alerts/index.html",
        {
            "active": list(active_alerts()),
            "pending": list(pending_alerts()),
            "silences": list(
                Silence.objects.active(timezone.now()).select_related(
                    "provider", "endpoint__provider", "canonical_model", "rule"
                )
            ),
            "history": list(recent_history(days=30)),
            # Switched off by a permanent delivery failure: people must see it here,
            # not find out when an alert goes unheard.
            "broken_channels": list(
                Channel.objects.filter(enabled=False).exclude(disabled_reason="")
            ),
        },
    )


def event(request: HttpRequest, pk: int) -> HttpResponse:
    """One alert: the metric around it with the baseline band, the window that fired it,
    the test's p-value and effect size, and the runs it was decided on."""
    alert = get_object_or_404(
        AlertEvent.objects.select_related(
            "endpoint__provider", "endpoint__canonical_model", "workload", "rule"
        ),
        pk=pk,
    )
    return render(
        request,
        "alerts/event.html",
        {"event": alert, "chart": event_chart(alert), "runs": runs_used(alert)},
    )
