"""Concurrency sweeps (probes/kinds/sweep.py) read back: one row per step in the API and CSV,
and the endpoint page's curve of aggregate against per-request speed, one line per week
(so an upgrade's effect shows as a line moving)."""

from __future__ import annotations

from collections import defaultdict

from django.http import HttpRequest, HttpResponse, JsonResponse

from dashboard.charts import PALETTE, _figure, _grid
from dashboard.web import api
from probes import kinds
from probes.models import Endpoint, ProbeRun

STEP_FIELDS = [
    "concurrency",
    "per_request_tps",
    "aggregate_tps",
    "ttft_ms_p50",
    "ttft_ms_p95",
    "goodput",
    "slo_met",
    "requests",
    "ok",
    "wall_ms",
]
COLUMNS = ["run_id", "started_at", "endpoint_id", "model_id", "workload", "region", "knee",
           "ttft_slo_ms", "tpot_slo_ms", *STEP_FIELDS]  # fmt: skip
WEEKS = 8  # lines on the endpoint page's curve


def step_rows(run: ProbeRun) -> list[dict]:
    summary = run.group_summary or {}
    head = {
        "run_id": run.pk,
        "started_at": run.started_at.isoformat(),
        "endpoint_id": run.endpoint_id,
        "model_id": run.endpoint.model_id,
        "workload": run.workload.slug,
        "region": run.region,
        "knee": summary.get("knee"),
        "ttft_slo_ms": summary.get("ttft_slo_ms"),
        "tpot_slo_ms": summary.get("tpot_slo_ms"),
    }
    return [{**head, **{k: step.get(k) for k in STEP_FIELDS}} for step in summary.get("steps", [])]


@api._guard
def sweeps(request: HttpRequest, csv_suffix: bool = False) -> HttpResponse:
    """Each concurrency step of the matching sweep runs, newest run first."""
    api._check_params(request.GET, [*api.RUN_FILTERS, "limit"])
    limit = api._limit(request.GET.get("limit"))
    runs = api.filter_runs(request.GET).filter(
        role="group", workload__kind__in=kinds.names("curve")
    )[:limit]
    rows = [row for run in runs for row in step_rows(run)]
    if api._wants_csv(request, csv_suffix):
        return api._csv("sweeps", COLUMNS, rows)
    return JsonResponse({"steps": rows, "fields": COLUMNS})


def curve(endpoint: Endpoint) -> dict | None:
    """Aggregate tok/s (x) against per-request tok/s (y), one line per ISO week."""
    runs = (
        ProbeRun.objects.filter(
            endpoint=endpoint, role="group", workload__kind__in=kinds.names("curve"), status="ok"
        )
        .order_by("-started_at")
        .values_list("started_at", "group_summary")[: WEEKS * 50]
    )
    weeks: dict[str, list[dict]] = defaultdict(list)
    for started_at, summary in runs:
        year, week, _ = started_at.isocalendar()
        weeks[f"{year}-W{week:02d}"].extend((summary or {}).get("steps", []))
    if not weeks:
        return None
    fig = _figure(
        "Concurrency: aggregate vs per-request speed, one line per week",
        xaxis=_grid(title={"text": "aggregate output tok/s"}, rangemode="tozero"),
        yaxis=_grid(title={"text": "per-request output tok/s"}, rangemode="tozero"),
    )
    for i, week in enumerate(sorted(weeks)[-WEEKS:]):
        by_step: dict[int, list[dict]] = defaultdict(list)
        for step in weeks[week]:
            if step.get("aggregate_tps") and step.get("per_request_tps"):
                by_step[step["concurrency"]].append(step)
        levels = sorted(by_step)
        median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731 - the week's typical run
        fig["data"].append(
            dict(
                type="scatter",
                mode="lines+markers+text",
                x=[median([s["aggregate_tps"] for s in by_step[c]]) for c in levels],
                y=[median([s["per_request_tps"] for s in by_step[c]]) for c in levels],
                text=[str(c) for c in levels],
                textposition="top center",
                name=week,
                line={"color": PALETTE[i % len(PALETTE)]},
            )
        )
    return fig
