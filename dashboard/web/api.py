"""JSON and CSV under /api/v1/: the same data as the pages, for scripts.

Field names are those of /methodology/, percentiles as suffixes (`output_tps_p50`).
Unknown parameters or values answer 400 with a message. Nothing here reads a secret:
providers are described by name, slug and flags, never base URLs, headers or keys.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_safe

from dashboard.definitions import AVAILABILITY_CAUSES, PERCENTILES
from dashboard.models import ROLLUP_METRICS
from dashboard.queries import aggregates, history
from dashboard.queries import filters as query_filters
from dashboard.queries import leaderboard as leaderboards
from dashboard.web import params as strict
from dashboard.web.caching import cacheable
from probes.engine import contract, reasons
from probes.kinds import checks
from probes.models import CLAIM_METRICS, CanonicalModel, Endpoint, ProbeRun, Provider, Workload

MAX_LIMIT = 500
DEFAULT_LIMIT = 50
SERIES_METRICS = (*ROLLUP_METRICS, "success_rate")

LEADERBOARD_COLUMNS = [
    "endpoint_id",
    "provider",
    "provider_name",
    "simulated",
    "model",
    "model_name",
    "model_id",
    "not_applicable",
    "rank",
    "unranked_reason",
    *(f"{m}_p{q}" for m in ROLLUP_METRICS for q in PERCENTILES),
    "stream_tps_p50",
    "blended_price_per_m",
    "success_rate",
    *(f"availability_{cause}" for cause in AVAILABILITY_CAUSES),
    "approx_tokens",
    "approx_tokens_share",
    "checked_runs",
    "valid_runs",
    "valid_share",
    "samples",
    "ok_samples",
    "client_bound_runs",
    "last_run_at",
    *(f"claimed_{m}{s}" for m, _ in CLAIM_METRICS for s in ("", "_high")),
]
RUN_COLUMNS = [
    "id",
    "started_at",
    "endpoint_id",
    "provider",
    "model",
    "model_id",
    "workload",
    "region",
    "run_group",
    "request_index",
    "role",
    *contract.OUTCOME_FIELDS,
    "client_bound",
    *contract.RUN_FIELDS,
    *contract.WORKLOAD_FIELDS,
    "methodology_version",
]


# One error type for bad input, whichever reader found it.
BadRequest = strict.BadParameter


def _error(message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=400)


def _check_params(params: Mapping[str, str], allowed: Iterable[str]) -> None:
    allowed = set(allowed) | {"format"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise BadRequest(
            f"Unknown parameter {', '.join(unknown)}. Accepted: {', '.join(sorted(allowed))}."
        )
    fmt = params.get("format", "json")
    if fmt not in ("json", "csv"):
        raise BadRequest(f"Unknown format {fmt!r}. Use json or csv.")


def _wants_csv(request: HttpRequest, csv_suffix: bool) -> bool:
    return csv_suffix or request.GET.get("format") == "csv"


# A spreadsheet runs a cell starting with one of these as a formula (OWASP "CSV
# injection"), and provider error texts, model ids and labels are not ours to trust.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A value as a CSV cell: text that a spreadsheet would run gets a leading quote.
    Numbers we emit stay numbers (a negative figure is data, not a formula)."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _csv(name: str, columns: list[str], rows: Iterable[Mapping]) -> HttpResponse:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: csv_cell(row.get(k)) for k in columns})
    response = HttpResponse(buffer.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


def _guard(view):
    """Turn bad input into a 400 with its message, for every API view."""

    def wrapped(request: HttpRequest, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except (BadRequest, query_filters.BadFilter) as error:
            return _error(str(error))

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return require_safe(cacheable(wrapped))


def _is_staff(request: HttpRequest) -> bool:
    return request.user.is_active and request.user.is_staff


@_guard
def index(request: HttpRequest) -> JsonResponse:
    names = ["leaderboard", "series", "runs", "catalog", "openapi"]
    return JsonResponse(
        {name: request.build_absolute_uri(reverse(f"api-{name}")) for name in names}
    )


@_guard
def leaderboard(request: HttpRequest, csv_suffix: bool = False) -> HttpResponse:
    _check_params(request.GET, ["model", "workload", "window", "region", "sort"])
    filters = query_filters.parse_filters(request.GET)
    board = leaderboards.leaderboard(filters)
    rows = [row.as_dict() for row in board.rows]
    # A row without runs says why, in the slot vocabulary's words, as the page does.
    skips = leaderboards.skipped_slots(board.rows, filters.workload)
    for row in rows:
        skip = skips.get(row["endpoint_id"])
        row["skipped_slots_24h"] = skip.as_dict() if skip else None
    if _wants_csv(request, csv_suffix):
        return _csv("leaderboard", LEADERBOARD_COLUMNS, [_flat_causes(row) for row in rows])
    return JsonResponse(
        {
            "filters": filters.as_params(),
            "window_start": board.start.isoformat(),
            "window_end": board.now.isoformat(),
            "rows": rows,
        }
    )


def _flat_causes(row: dict) -> dict:
    """A CSV row: availability_by_cause as one column per cause (availability_ok, …)."""
    by_cause = row.get("availability_by_cause") or {}
    return {
        **row,
        **{f"availability_{cause}": by_cause.get(cause) for cause in AVAILABILITY_CAUSES},
    }


@_guard
def series(request: HttpRequest, csv_suffix: bool = False) -> HttpResponse:
    _check_params(request.GET, ["endpoint", "metric", "window", "workload", "region"])
    endpoint = _endpoint(request.GET.get("endpoint"))
    metric = query_filters.one_of(
        "metric", request.GET.get("metric") or "output_tps", SERIES_METRICS
    )
    filters = query_filters.parse_history_filters(request.GET, [endpoint.pk])
    (hist,) = history.history(
        [endpoint],
        window=filters.window,
        workload=filters.workload,
        region=filters.region,
        metrics=ROLLUP_METRICS,
    )
    if metric == "success_rate":
        points = [
            {"t": t.isoformat(), "success_rate": _r(rate, 4), "samples": n}
            for t, rate, n in hist.availability
        ]
        columns = ["t", "success_rate", "samples"]
    else:
        points = [
            {
                "t": p.t.isoformat(),
                f"{metric}_p25": _r(p.p25),
                f"{metric}_p50": _r(p.p50),
                f"{metric}_p75": _r(p.p75),
                f"{metric}_p95": _r(p.p95),
                "samples": p.samples,
            }
            for p in hist.series[metric]
        ]
        quantiles = [f"{metric}_p{q}" for q in (25, 50, 75, 95)]
        columns = ["t", *quantiles, "samples"]
    if _wants_csv(request, csv_suffix):
        return _csv(f"series-{endpoint.pk}-{metric}", columns, points)
    return JsonResponse(
        {
            "endpoint_id": endpoint.pk,
            "metric": metric,
            # Which resolution the one rule picked for this series (queries/resolution.py).
            "bucket": hist.resolution,
            **filters.as_params(),
            "points": points,
        }
    )


def _endpoint(value: str | None) -> Endpoint:
    if not value:
        raise BadRequest("The endpoint parameter is required (an endpoint id, see catalog).")
    pk = strict.record_id("endpoint", value)
    endpoint = Endpoint.objects.select_related("provider", "canonical_model").filter(pk=pk)
    if not endpoint:
        raise BadRequest(
            f"Unknown endpoint {strict.shown(value)}. See /api/v1/catalog for endpoint ids."
        )
    return endpoint[0]


def _r(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


# ------------------------------------------------------------------------------ runs

RUN_FILTERS = [
    "endpoint",
    "provider",
    "model",
    "workload",
    "role",
    "region",
    "status",
    "since",
    "until",
]


def filter_runs(params: Mapping[str, str]):
    """Runs matching the API filters, newest first; BadRequest on unknown values."""
    runs = ProbeRun.objects.listing().select_related(
        "endpoint__provider", "endpoint__canonical_model", "workload"
    )
    if params.get("endpoint"):
        runs = runs.filter(endpoint=_endpoint(params["endpoint"]))
    if params.get("provider"):
        slug = query_filters.one_of(
            "provider", params["provider"], Provider.objects.values_list("slug", flat=True)
        )
        runs = runs.filter(endpoint__provider__slug=slug)
    if params.get("model"):
        slug = query_filters.one_of(
            "model", params["model"], CanonicalModel.objects.values_list("slug", flat=True)
        )
        runs = runs.filter(endpoint__canonical_model__slug=slug)
    if params.get("workload"):
        runs = runs.filter(workload__slug=query_filters.workload_param(params["workload"]))
    if params.get("role"):
        runs = runs.filter(
            role=query_filters.one_of("role", params["role"], ("single", "step", "group"))
        )
    if params.get("region"):
        runs = runs.filter(
            region=query_filters.one_of("region", params["region"], query_filters.regions())
        )
    if params.get("status"):
        runs = runs.filter(
            status=query_filters.one_of("status", params["status"], query_filters.STATUS_NAMES)
        )
    if params.get("since"):
        runs = runs.filter(started_at__gte=strict.instant("since", params["since"]))
    if params.get("until"):
        runs = runs.filter(started_at__lt=strict.instant("until", params["until"]))
    # Sort by started_at then id: the run_recent_idx index serves it, and ties are stable.
    return runs.order_by("-started_at", "-id")


def _limit(value: str | None) -> int:
    if not value:
        return DEFAULT_LIMIT
    return strict.whole_number("limit", value, 1, MAX_LIMIT)


def run_as_dict(run: ProbeRun) -> dict:
    e = run.endpoint
    data = {
        "id": run.pk,
        "started_at": run.started_at.isoformat(),
        "endpoint_id": e.pk,
        "provider": e.provider.slug,
        "simulated": e.provider.simulated,
        "model": e.canonical_model.slug,
        "model_id": e.model_id,
        "workload": run.workload.slug,
        "region": run.region,
        # A group's requests share run_group; the "group" row is its ranked summary.
        "run_group": str(run.run_group),
        "request_index": run.request_index,
        "role": run.role,
        "group_summary": run.group_summary,
        "client_bound": run.client_bound,
        "methodology_version": run.methodology_version,
    }
    for name in (*contract.OUTCOME_FIELDS, *contract.RUN_FIELDS, *contract.WORKLOAD_FIELDS):
        value = getattr(run, name)
        data[name] = float(value) if value is not None and name.endswith("cost_usd") else value
    # The public API speaks our words: the provider's finish reason and a check's detail
    # (which quotes the answer) are staff's, on the run page.
    data["finish_reason"] = reasons.finish_word(run.finish_reason)
    data["check_detail"] = checks.public_detail(run.check_detail)
    return data


@_guard
def runs(request: HttpRequest, csv_suffix: bool = False) -> HttpResponse:
    _check_params(request.GET, [*RUN_FILTERS, "limit", "cursor"])
    limit = _limit(request.GET.get("limit"))
    selected = filter_runs(request.GET)
    if request.GET.get("cursor"):
        when, pk = strict.decode_cursor(request.GET["cursor"])
        selected = selected.filter(started_at__lte=when).exclude(started_at=when, id__gte=pk)
    page = list(selected[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    rows = [run_as_dict(run) for run in page]
    if _wants_csv(request, csv_suffix):
        return _csv("runs", RUN_COLUMNS, rows)
    next_cursor = strict.encode_cursor(page[-1].started_at, page[-1].pk) if more else None
    next_url = None
    if next_cursor:
        params = request.GET.copy()
        params["cursor"] = next_cursor
        next_url = request.build_absolute_uri(f"{request.path}?{params.urlencode()}")
    return JsonResponse({"runs": rows, "next_cursor": next_cursor, "next": next_url})


# ---------------------------------------------------------------------------- catalog


@_guard
def catalog(request: HttpRequest, csv_suffix: bool = False) -> HttpResponse:
    _check_params(request.GET, [])
    # Switched-off providers (a key not yet set, an internal server parked) are the
    # operator's business: staff see them, visitors do not.
    providers = (
        Provider.objects.all() if _is_staff(request) else Provider.objects.filter(enabled=True)
    )
    endpoints = list(
        Endpoint.objects.select_related("provider", "canonical_model").filter(
            provider__in=providers
        )
    )
    prices = leaderboards.current_prices(e.pk for e in endpoints)
    endpoint_rows = []
    for e in endpoints:
        price = prices.get(e.pk)
        endpoint_rows.append(
            {
                "id": e.pk,
                "provider": e.provider.slug,
                "simulated": e.provider.simulated,
                "model": e.canonical_model.slug,
                "model_id": e.model_id,
                "enabled": e.enabled and e.provider.enabled,
                "input_per_m": float(price.input_per_m) if price else None,
                "output_per_m": float(price.output_per_m) if price else None,
                "cached_input_per_m": float(price.cached_input_per_m)
                if price and price.cached_input_per_m is not None
                else None,
                "blended_price_per_m": float(round(price.blended_per_m, 4)) if price else None,
                "price_effective_from": price.effective_from.isoformat() if price else None,
            }
        )
    if _wants_csv(request, csv_suffix):
        columns = list(endpoint_rows[0]) if endpoint_rows else ["id"]
        return _csv("endpoints", columns, endpoint_rows)
    return JsonResponse(
        {
            "providers": [
                {
                    "slug": p.slug,
                    "name": p.name,
                    "simulated": p.simulated,
                    "api_style": p.api_style,
                    "website": p.website,
                }
                for p in providers
            ],
            "models": [
                {
                    "slug": m.slug,
                    "name": m.name,
                    "family": m.family,
                    "parameters_b": float(m.parameters_b) if m.parameters_b else None,
                    "open_weights": m.open_weights,
                }
                for m in CanonicalModel.objects.all()
            ],
            "endpoints": endpoint_rows,
            "workloads": [
                {
                    "slug": w.slug,
                    "name": w.name,
                    "description": w.description,
                    "max_tokens": w.max_tokens,
                    "approx_input_tokens": w.approx_input_tokens,
                }
                for w in Workload.objects.all()
            ],
            "regions": query_filters.regions(),
            "windows": list(aggregates.HISTORY_WINDOWS),
        }
    )
