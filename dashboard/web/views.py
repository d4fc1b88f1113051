"""The pages. Thin: parse filters, ask dashboard/queries/, hand figures from charts.py."""

from __future__ import annotations

from functools import cache

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.utils import timezone
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from dashboard import charts, maintenance_bands, uptime_charts
from dashboard.alerts.queries import firing_by_endpoint
from dashboard.definitions import (
    APPROX_TOKENS,
    COMPARISONS,
    METRICS,
    RUN_FIELDS,
    STATUS_MEANINGS,
)
from dashboard.models import ROLLUP_METRICS
from dashboard.queries import aggregates, claims, history, ranking
from dashboard.queries import filters as query_filters
from dashboard.queries import leaderboard as leaderboards
from dashboard.web import badges, server_side
from dashboard.web.caching import cacheable
from dashboard.web.marks import history_marks
from probes.engine import contract, reasons
from probes.engine.request import limit_rows
from probes.kinds import checks
from probes.kinds.headline import headline_metrics
from probes.models import CanonicalModel, Endpoint, Probe, ProbeRun, Provider, Workload
from probes.scheduling import ledger

ACTIVE_ALERTS_TEMPLATE = "alerts/partials/active.html"
HISTORY_METRICS = ("output_tps", "ttft_ms", "e2e_ms")
# A workload's own figures, shown only where its data has them (Leaderboard.headline_columns):
# a voice turn's first sentence, a tool call's completion, the share of valid answers, a
# cached pair's cold TTFT and savings, a parallel batch's slowdown, a long prompt's prefill.
HEADLINE_COLUMNS = (
    "first_sentence_ms",
    "tool_call_ms",
    "valid_share",
    "cold_ttft_ms",
    "ttft_saved_pct",
    "cost_saved_pct",
    "stream_tps",
    "slowdown",
    "prefill_tps",
    "output_tokens_per_j",  # any workload, where a power source measured it
)
TABLE_COLUMNS = (
    "output_tps",
    "ttft_ms",
    "ttfat_ms",
    "e2e_ms",
    *HEADLINE_COLUMNS,
    "blended_price",
    "success_rate",
    "samples",
    "last_run",
)
# Tails sit under their median in the same cell, each with its own sort link: two more
# columns would push the busiest boards (cached-10k) past a 1,400 px screen.
TAIL_COLUMNS = {"ttft_ms": "ttft_ms_p95", "e2e_ms": "e2e_ms_p95"}
RECENT_RUNS = 25


def bad_filter(request: HttpRequest, error: query_filters.BadFilter) -> HttpResponse:
    return render(request, "dashboard/bad_filter.html", {"message": str(error)}, status=400)


def _measured_energy(board) -> frozenset[str]:
    """The tokens-per-joule column, where some row's endpoint has energy telemetry."""
    measured = any(row.agg and row.agg.percentile("output_tokens_per_j", 50) for row in board.rows)
    return frozenset({"output_tokens_per_j"}) if measured else frozenset()


def _choices() -> dict:
    return {
        "models": CanonicalModel.objects.filter(endpoints__isnull=False).distinct(),
        "workloads": Workload.objects.all(),
        "windows": list(aggregates.LEADERBOARD_WINDOWS),
        "regions": query_filters.regions(),
        # What each filter shows when the URL does not name it (static/js/filters.js
        # re-syncs the dropdowns from the URL after Back).
        "defaults": {
            "model": aggregates.ALL,
            "workload": query_filters.default_workload(),
            "window": aggregates.DEFAULT_WINDOW,
            "region": aggregates.ALL,
        },
    }


@require_safe
@cacheable
@vary_on_headers("HX-Request")
def leaderboard(request: HttpRequest) -> HttpResponse:
    try:
        filters = query_filters.parse_filters(request.GET)
    except query_filters.BadFilter as error:
        return bad_filter(request, error)
    board = leaderboards.leaderboard(filters)
    shown = board.headline_columns | _measured_energy(board)
    spark_scale = charts.spark_scale(row.sparkline for row in board.rows)
    context = {
        "board": board,
        "filters": filters,
        "params": filters.as_params(),
        "columns": [
            (key, METRICS[key], filters.sort_param_for(key))
            for key in TABLE_COLUMNS
            if key not in HEADLINE_COLUMNS or key in shown
        ],
        "headline": [key for key in HEADLINE_COLUMNS if key in shown],
        "tail_sorts": {
            key: (tail, filters.sort_param_for(tail)) for key, tail in TAIL_COLUMNS.items()
        },
        "sort_provider": filters.sort_param_for("provider"),
        "sparklines": {
            row.endpoint.pk: charts.sparkline(row.sparkline, spark_scale) for row in board.rows
        },
        "spark_scale": spark_scale,
        "spark_bucket": leaderboards.sparkline_bucket(filters.window),
        "cause_strips": {
            row.endpoint.pk: uptime_charts.cause_strip(row.availability_by_cause)
            for row in board.rows
        },
        "firing_alerts": firing_by_endpoint(row.endpoint.pk for row in board.rows),
        # An empty cell says why: the slots that were skipped, and the latest reason.
        "skipped_slots": leaderboards.skipped_slots(board.rows, filters.workload),
        "speed_price": charts.speed_vs_price(board.rows, board.rank_metric),
        "ttft_speed": charts.ttft_vs_speed(board.rows, board.rank_metric),
        "rank_label": f"median {METRICS[board.rank_metric].label}",
        "default_sort": query_filters.default_sort(filters.workload),
        "has_catalog": Endpoint.objects.exists(),
        "has_probes": Probe.objects.active().exists(),
        "workload_probed": filters.workload is None
        or Probe.objects.active().filter(workload__slug=filters.workload).exists(),
        "approx_tokens_title": APPROX_TOKENS,
    }
    # A table swap, unless htmx is restoring history (then it needs the whole page).
    if request.htmx and not request.htmx.history_restore_request:
        context["swap"] = True
        return render(request, "dashboard/partials/leaderboard_table.html", context)
    context.update(_choices())
    return render(request, "dashboard/leaderboard.html", context)


def _history_context(request: HttpRequest, endpoints: list[Endpoint]) -> dict:
    """Filters, charts, availability and error breakdown for a set of endpoints."""
    filters = query_filters.parse_history_filters(request.GET, [e.pk for e in endpoints])
    histories = history.history(
        endpoints, window=filters.window, workload=filters.workload, region=filters.region
    )
    now = timezone.now()
    span = (now - aggregates.HISTORY_WINDOWS[filters.window], now)
    totals = aggregates.Agg()
    for h in histories:
        totals.merge(h.totals)
    # Planned maintenance, shaded on every chart of the page (dashboard/maintenance_bands.py).
    planned = maintenance_bands.bands(endpoints, span)
    marks = history_marks(endpoints, *span, filters.workload)
    axis = charts.page_span(span, histories)  # one time axis for every chart of the page
    return {
        "maintenance_bands": planned,
        "filters": filters,
        "params": filters.as_params(),
        "windows": list(aggregates.HISTORY_WINDOWS),
        "workloads": Workload.objects.all(),
        "regions": query_filters.regions(),
        "histories": histories,
        "history_charts": [
            (
                f"history-{m}",
                maintenance_bands.shade(charts.history(histories, m, axis, marks), planned),
            )
            for m in (*HISTORY_METRICS, *_self_hosted_metrics(endpoints))
        ],
        "availability_chart": maintenance_bands.shade(
            charts.availability(histories, axis), planned
        ),
        "cause_chart": maintenance_bands.shade(
            uptime_charts.availability_by_cause(histories, axis), planned
        ),
        "totals": totals,
        "breakdown": history.status_breakdown(totals),
        "status_meanings": STATUS_MEANINGS,
        "has_history": totals.runs > 0,
        "approx_tokens_title": APPROX_TOKENS,
    }


def _self_hosted_metrics(endpoints: list[Endpoint]) -> tuple[str, ...]:
    """History charts of the server's own side, where an endpoint has the telemetry."""
    out = ("server_queue_ms",) if any(e.server_metrics_url for e in endpoints) else ()
    return out + (("output_tokens_per_j",) if any(e.power_url for e in endpoints) else ())


def _recent_runs(**scope) -> list[ProbeRun]:
    return list(
        ProbeRun.objects.listing()
        .filter(**scope)
        .select_related("endpoint__provider", "endpoint__canonical_model", "workload")
        .order_by("-started_at", "-id")[:RECENT_RUNS]
    )


def _history_page(
    request: HttpRequest,
    subject,
    kind: str,
    endpoints: list[Endpoint],
    runs_scope: dict,
    **extra,
) -> HttpResponse:
    """The history page of a model, a provider or an endpoint: one template, one query.
    Its recent runs follow the page's workload and region filters."""
    try:
        context = _history_context(request, endpoints)
    except query_filters.BadFilter as error:
        return bad_filter(request, error)
    filters = context["filters"]
    runs = _recent_runs(
        **runs_scope,
        **({"workload": filters.workload} if filters.workload else {}),
        **({"region": filters.region} if filters.region != aggregates.ALL else {}),
    )
    context.update(subject=subject, kind=kind, endpoints=endpoints, runs=runs, **extra)
    # Catalog endpoints nobody can measure (no key, disabled) and without runs in the
    # window are counted and listed apart, once, with the reason; not among the served.
    idle = {e.pk: why for e in endpoints if (why := ranking.not_measured_reason(e))}
    with_runs = {h.endpoint.pk for h in context["histories"] if h.totals.runs}
    context["idle"] = [(e, idle[e.pk]) for e in endpoints if e.pk in idle and e.pk not in with_runs]
    shown = {e.pk for e, _ in context["idle"]}
    context["measured_histories"] = [h for h in context["histories"] if h.endpoint.pk not in shown]
    context["not_measured"] = idle.get(endpoints[0].pk, "") if kind == "endpoint" else ""
    # When no endpoint can be measured the empty state says why (a key), not "wait";
    # when they are probed, which probe is still to run, and what they measure instead.
    if endpoints and len(idle) == len(endpoints):
        context["all_idle"] = sorted(set(idle.values()))
    elif not context["has_history"]:
        context["unmeasured"] = history.unmeasured(endpoints, filters.workload, filters.region)
    if kind == "endpoint":
        (endpoint,) = endpoints
        now = timezone.now()
        context["claims"] = claims.compared_over(
            endpoints,
            filters.workload,
            {endpoint.pk: context["totals"]},
            now - aggregates.HISTORY_WINDOWS[filters.window],
            now,
            filters.region,
        )[endpoint.pk]
        # Speed badges are per workload: the page's own, or, with every workload pooled
        # (a badge cannot pool them), the endpoint's headline one that ranks on speed;
        # never a loop's or a batch's figure passed off as its output speed.
        context["badge_workload"] = (
            filters.workload.slug
            if filters.workload
            else query_filters.headline_workload([endpoint.pk], ranked_on_speed=True)
        )
        context["badges"] = badges.endpoint_badge_links(
            request, endpoint, context["badge_workload"]
        )
    return render(request, "dashboard/history_page.html", context)


@require_safe
@cacheable
def model_page(request: HttpRequest, slug: str) -> HttpResponse:
    model = get_object_or_404(CanonicalModel, slug=slug)
    endpoints = list(model.endpoints.select_related("provider", "canonical_model"))
    return _history_page(request, model, "model", endpoints, {"endpoint__canonical_model": model})


@require_safe
@cacheable
def provider_page(request: HttpRequest, slug: str) -> HttpResponse:
    provider = get_object_or_404(Provider, slug=slug)
    endpoints = list(provider.endpoints.select_related("provider", "canonical_model"))
    return _history_page(request, provider, "provider", endpoints, {"endpoint__provider": provider})


@cache
def _has_alerts_partial() -> bool:
    try:
        get_template(ACTIVE_ALERTS_TEMPLATE)
    except TemplateDoesNotExist:
        return False
    return True


@require_safe
@cacheable
def endpoint_page(request: HttpRequest, pk: int) -> HttpResponse:
    endpoint = get_object_or_404(
        Endpoint.objects.select_related("provider", "canonical_model"), pk=pk
    )
    probes = list(endpoint.probes.select_related("workload"))
    return _history_page(
        request,
        endpoint,
        "endpoint",
        [endpoint],
        {"endpoint": endpoint},
        endpoint=endpoint,
        price=endpoint.current_price,
        probes=probes,
        probe_skips=ledger.skips_by(
            "probe_id",
            list(endpoint.probes.values_list("pk", flat=True)),
            timezone.now() - leaderboards.SKIPS_SHOWN_FOR,
        ),
        alerts_template=ACTIVE_ALERTS_TEMPLATE if _has_alerts_partial() else None,
        **server_side.endpoint_context(endpoint),
    )


@require_safe
@cacheable
def run_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(
        ProbeRun.objects.select_related(
            "endpoint__provider", "endpoint__canonical_model", "workload", "probe"
        ),
        pk=pk,
    )
    gaps = charts.event_gaps_ms(run.timeline)
    timings = [
        ("Time to first token", run.ttft_ms, _sum(run.server_queue_ms, run.server_prefill_ms)),
        ("Generation", _decode_ms(run), run.server_decode_ms),
        ("End-to-end", run.e2e_ms, run.server_total_ms),
        ("Output speed (tok/s)", run.output_tps, run.server_output_tps),
        ("Prefill speed (tok/s)", run.prefill_tps, run.server_prefill_tps),
    ]
    staff = request.user.is_staff
    fields = [(name, _shown(run, name, staff), text) for name, text in RUN_FIELDS.items()]
    members = []
    if run.role != "single":
        members = list(
            ProbeRun.objects.listing()
            .filter(run_group=run.run_group)
            .select_related("workload")
            .order_by("request_index")
        )
    summary_row = next((m for m in members if m.role == "group"), None)
    context = {
        "run": run,
        "fields": fields,
        "members": members,
        "summary": summary_row.group_summary if summary_row else None,
        "summary_run": summary_row,
        "timings": timings,
        "timeline_chart": charts.token_timeline(run.timeline) if run.timeline else None,
        "gap_chart": charts.gap_histogram(run.timeline) if len(gaps) > 1 else None,
        "status_meaning": STATUS_MEANINGS.get(run.status, ""),
        "reason_label": reasons.label(run.reason) if run.reason else "",
        "read_path_meaning": contract.OUTCOME_FIELDS["read_path"].definition,
        "has_server_timing": any(theirs is not None for _, _, theirs in timings),
        "server_timing": run.server_timing
        if staff
        else server_side.public_timing(run.server_timing),
        # A visitor reads our words for a failed check; the detail quotes the answer.
        "check_detail": run.check_detail if staff else checks.public_detail(run.check_detail),
        "breakdown": server_side.breakdown(run),
    }
    return render(request, "dashboard/run.html", context)


def _shown(run: ProbeRun, name: str, staff: bool):
    """A field as this viewer sees it: the provider's finish reason and a check's detail
    (which quotes the answer) are staff's; a visitor reads them in our words."""
    value = getattr(run, name)
    if staff:
        return value
    if name == "finish_reason":
        return reasons.finish_word(value)
    if name == "check_detail":
        return checks.public_detail(value)
    return value


def _sum(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _decode_ms(run: ProbeRun) -> float | None:
    if run.e2e_ms is None or run.ttft_ms is None:
        return None
    return run.e2e_ms - run.ttft_ms


@require_safe
@cacheable
def methodology(request: HttpRequest) -> HttpResponse:
    workloads = list(Workload.objects.annotate(probe_count=Count("probes")))
    for w in workloads:  # the leaderboard columns of its own (Leaderboard.headline_columns)
        w.headline_keys = headline_metrics(w)
        w.headline = [METRICS[key] for key in HEADLINE_COLUMNS if key in w.headline_keys]
    context = {
        "metrics": METRICS.values(),
        "aggregated": ROLLUP_METRICS,
        "run_fields": [
            f
            for f in (
                *contract.OUTCOME_FIELDS.values(),
                *contract.RUN_FIELDS.values(),
                *contract.WORKLOAD_FIELDS.values(),
            )
            if f.name != "status"  # statuses have their own section
        ],
        "methodology_version": contract.METHODOLOGY_VERSION,
        "statuses": STATUS_MEANINGS.items(),
        "limits": limit_rows(),
        "comparisons": COMPARISONS,
        "workloads": workloads,
        "prefill_workloads": [w.slug for w in workloads if "prefill_tps" in w.headline_keys],
        "regions": query_filters.regions(),
        "rank_min_ok_runs": ranking.min_ok_runs(),
    }
    return render(request, "dashboard/methodology.html", context)
