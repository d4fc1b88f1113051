from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboard.alerts.queries import active_alerts, recent_history


def index(request: HttpRequest) -> HttpResponse:
    """Firing alerts first, then the last 30 days of resolved ones."""
    return render(
        request,
        "alerts/index.html",
        {"active": list(active_alerts()), "history": list(recent_history(days=30))},
    )
