from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboard.alerts import silencing
from dashboard.alerts.defaults import describe
from dashboard.alerts.detail import event_chart, runs_used
from dashboard.alerts.history import rule_backtest
from dashboard.alerts.models import AlertEvent, AlertRule, Channel, Silence
from dashboard.alerts.queries import (
    active_alerts,
    configured_rules,
    pending_alerts,
    recent_history,
    series_rows,
)


def index(request: HttpRequest, silence_form=None, status: int = 200) -> HttpResponse:
    """Firing alerts first, then pending ones, active silences (made and ended here by
    staff allowed to), and the last 30 days."""
    if silence_form is None and silencing.can_add(request):
        silence_form = silencing.SilenceForm()
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
            "silence_form": silence_form,
            "can_end_silences": silencing.can_end(request),
            # Every configured rule and its series' states, before anything fires.
            "rules": configured_rules(),
            "default_rule_help": describe(),
        },
        status=status,
    )


def rule(request: HttpRequest, pk: int) -> HttpResponse:
    """One rule: its scope and condition, each series' state at the last evaluation, and
    its backtest over the stored history of the last 30 days."""
    alert_rule = get_object_or_404(
        AlertRule.objects.select_related("endpoint__provider", "canonical_model", "workload"),
        pk=pk,
    )
    return render(
        request,
        "alerts/rule.html",
        {
            "rule": alert_rule,
            "series": series_rows(alert_rule),
            "backtest": rule_backtest(alert_rule, timezone.now()),
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


def _silences() -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("alerts:index") + "#silences")


@require_POST
def silence_add(request: HttpRequest) -> HttpResponse:
    form = silencing.create(request)
    # Bad input: the page again with the form's errors, nothing made.
    return _silences() if form is None else index(request, silence_form=form, status=400)


@require_POST
def silence_end(request: HttpRequest, pk: int) -> HttpResponse:
    silencing.end(request, pk)
    return _silences()
