"""/metrics: Prometheus exposition of what the pages show, in Prometheus' conventions.

Computed at scrape time from the database (no in-process counters: several web workers
would each hold a part, and must agree). Counters and histograms are read from rollups,
which outlive raw-run retention, so they never go down (dashboard/queries/lifetime.py);
histograms are in seconds, in the buckets of dashboard/prom_buckets.py, so that
`histogram_quantile` and `sum by (…)` work across endpoints, regions and time.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from dashboard import prom_buckets
from dashboard.middleware import bearer_token_ok
from dashboard.models import RunRollup
from dashboard.queries import aggregates, lifetime
from dashboard.queries.claims import standing as claim_standing
from dashboard.shared_result import SharedResult
from dashboard.web.exposition import CONTENT_TYPE, Exposition, compressed, labels
from probes.models import Claim, Endpoint, Probe, Workload
from probes.scheduling import slot_reasons

RATIO_WINDOW = timedelta(hours=24)
LABELS = ("provider", "model", "endpoint", "workload", "region", "simulated")
CLAIM_LABELS = ("provider", "model", "endpoint", "workload")

TOKEN_HELP = {
    "input": "Prompt tokens sent",
    "output": "Output tokens received",
    "cached": "Prompt tokens the provider served from its cache",
    "reasoning": "Reasoning tokens the provider reported",
}
HISTOGRAM_HELP = {
    "time_to_first_token": "Time from sending the request to the first streamed token",
    "time_to_first_answer_token": "Time to the first answer token (after any reasoning)",
    "request_duration": "Time from sending the request to the last byte (end to end)",
    "time_per_output_token": "Seconds per output token while streaming (1 / output speed); "
    "runs too short to rank on speed are left out",
}
# Claim metric → (exported gauge, factor to its base unit).
CLAIM_GAUGES = {
    "output_tps": ("inferwatch_claim_output_tokens_per_second", 1.0),
    "ttft_ms": ("inferwatch_claim_time_to_first_token_seconds", 0.001),
    "e2e_ms": ("inferwatch_claim_request_duration_seconds", 0.001),
    "first_sentence_ms": ("inferwatch_claim_time_to_first_sentence_seconds", 0.001),
    "tool_call_ms": ("inferwatch_claim_tool_call_duration_seconds", 0.001),
}


def render(now: datetime | None = None) -> bytes:
    now = now or timezone.now()
    endpoints = {e.pk: e for e in Endpoint.objects.select_related("provider", "canonical_model")}
    workloads = dict(Workload.objects.values_list("pk", "slug"))
    series = lifetime.totals(now)
    label_texts: dict[tuple, str | None] = {}

    def series_labels(endpoint_id: int, workload_id: int, region: str) -> str | None:
        key = (endpoint_id, workload_id, region)
        if key not in label_texts:
            e = endpoints.get(endpoint_id)
            label_texts[key] = e and labels(
                LABELS,
                (
                    e.provider.slug,
                    e.canonical_model.slug,
                    e.model_id,
                    workloads.get(workload_id, str(workload_id)),
                    region,
                    str(e.provider.simulated).lower(),
                ),
            )
        return label_texts[key]

    out = Exposition()
    totals = sorted(
        (text, t) for key, t in series.items() if (text := series_labels(*key)) is not None
    )
    _histograms(out, totals)
    _counters(out, totals)
    _ratios(out, now, series_labels)
    _claims(out, endpoints, {(e, w) for e, w, _ in series})
    _lag(out, now, series_labels)
    _slots(out)
    return out.body()


def _histograms(out: Exposition, totals: list[tuple[str, lifetime.Totals]]) -> None:
    for histogram, (_, inverse) in prom_buckets.HISTOGRAMS.items():
        name = f"inferwatch_{histogram}_seconds"
        out.family(name, "histogram", f"{HISTOGRAM_HELP[histogram]} (ok runs, all time).")
        for text, t in totals:
            if histogram in t.buckets:
                out.histogram(name, text, t.buckets[histogram], t.sums[histogram], inverse)


def _counters(out: Exposition, totals: list[tuple[str, lifetime.Totals]]) -> None:
    out.family("inferwatch_probe_runs_total", "counter", "Runs recorded, by status (all time).")
    for text, t in totals:
        for status, n in sorted(t.status_counts.items()):
            out.sample("inferwatch_probe_runs_total", f'{text},status="{status}"', n)
    for kind, help_text in TOKEN_HELP.items():
        name = f"inferwatch_{kind}_tokens_total"
        out.family(name, "counter", f"{help_text} (all runs, all time).")
        for text, t in totals:
            out.sample(name, text, t.tokens[kind])
    out.family("inferwatch_cost_usd_total", "counter", "What the runs cost, in USD (all time).")
    for text, t in totals:
        out.sample("inferwatch_cost_usd_total", text, t.cost_usd)


# Runs, ok runs, checked and valid answers per series over a window, summed in Postgres
# from hourly rollups and the raw tail (the leaderboard's own split, aggregates.plan_window):
# the Python merge of thousands of series took most of a scrape.
_RATIO_SQL = f"""
SELECT endpoint_id, workload_id, region, sum(runs), sum(ok_runs), sum(checked), sum(valid)
  FROM (
    SELECT endpoint_id, workload_id, region, runs, ok_runs, checked_runs AS checked,
           valid_runs AS valid
      FROM dashboard_runrollup
     WHERE granularity = '{RunRollup.HOUR}' AND bucket_start >= %(start)s
           AND bucket_start < %(raw_from)s
    UNION ALL
    SELECT endpoint_id, workload_id, region, 1, (status = 'ok')::int,
           (status = 'ok' AND output_valid IS NOT NULL)::int,
           (status = 'ok' AND output_valid IS TRUE)::int
      FROM probes_proberun
     WHERE started_at >= %(raw_from)s AND started_at <= %(now)s AND role <> 'step'
  ) AS parts
 GROUP BY 1, 2, 3
"""


def recent_ratios(now: datetime) -> dict[tuple, tuple[float | None, float | None]]:
    """(success ratio, valid answer ratio) per series over RATIO_WINDOW, as the
    leaderboard counts them (Agg.success_rate, Agg.valid_share)."""
    plan = aggregates.plan_window(now - RATIO_WINDOW, now, use_days=False)
    start = plan.rollups[0][1] if plan.rollups else plan.raw_from
    params = {"start": start, "raw_from": plan.raw_from, "now": now}
    with connection.cursor() as cursor:
        cursor.execute(_RATIO_SQL, params)
        return {
            (e, w, r): (ok / runs if runs else None, valid / checked if checked else None)
            for e, w, r, runs, ok, checked, valid in cursor.fetchall()
        }


def _ratios(out: Exposition, now: datetime, series_labels) -> None:
    rows = sorted(
        (text, ratios)
        for key, ratios in recent_ratios(now).items()
        if (text := series_labels(*key))
    )
    for index, (name, help_text) in enumerate(
        (
            ("inferwatch_success_ratio", "Runs with status ok / all runs"),
            (
                "inferwatch_valid_answer_ratio",
                "Checked answers (JSON, tool calls) that were valid / all checked",
            ),
        )
    ):
        out.family(name, "gauge", f"{help_text}, last 24 h (0-1).")
        for text, ratios in rows:
            if ratios[index] is not None:
                out.sample(name, text, ratios[index])


def claim_rows(
    endpoints: dict[int, Endpoint], measured: set[tuple[int, int]]
) -> list[tuple[Endpoint, Workload, Claim]]:
    """(endpoint, workload, claim) for each measured series (endpoint id, workload id) and
    each metric's claim that stands beside it: the board's pairing (Claim.covers: a claim
    about no workload only beside single-stream workloads; Claim.precedence)."""
    workloads = Workload.objects.in_bulk({w for _, w in measured})
    claims = list(Claim.objects.filter(metric__in=CLAIM_GAUGES))
    rows = []
    for endpoint_id, workload_id in sorted(measured):
        e, workload = endpoints.get(endpoint_id), workloads.get(workload_id)
        if e is None or workload is None:
            continue
        covering = [c for c in claims if c.covers(e, workload)]
        rows += [(e, workload, c) for c in claim_standing(covering).values()]
    return rows


def _claims(out: Exposition, endpoints: dict[int, Endpoint], measured: set) -> None:
    by_gauge: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for e, workload, claim in claim_rows(endpoints, measured):
        name, factor = CLAIM_GAUGES[claim.metric]
        # A range (65–95 ms) is drawn at its middle.
        value = claim.value if claim.value_high is None else (claim.value + claim.value_high) / 2
        key = (e.provider.slug, e.canonical_model.slug, e.model_id, workload.slug)
        by_gauge[name].append((labels(CLAIM_LABELS, key), value * factor))
    for name, _ in CLAIM_GAUGES.values():
        out.family(
            name,
            "gauge",
            "What the vendor published, beside each workload measured that it describes "
            "(a claim about no workload: single-stream workloads only); ranges at the middle.",
        )
        for text, value in sorted(by_gauge[name]):
            out.sample(name, text, value)


def _lag(out: Exposition, now: datetime, series_labels) -> None:
    out.family(
        "inferwatch_probe_lag_seconds",
        "gauge",
        "How far behind its schedule each active probe is (0 when on time).",
    )
    for probe in Probe.objects.active().order_by("pk"):
        text = series_labels(probe.endpoint_id, probe.workload_id, probe.region)
        if text is not None:
            out.sample(
                "inferwatch_probe_lag_seconds",
                text,
                max(0.0, (now - probe.next_run_at).total_seconds()),
            )


def _slots(out: Exposition) -> None:
    counts = slot_reasons.counts()
    # Every region active probes run from has its series, at 0 when nothing happened, so
    # an alert on it has a series to watch.
    for region in set(Probe.objects.active().values_list("region", flat=True)):
        for state in slot_reasons.COUNTED_STATES:
            counts.setdefault((state, region, "none"), 0)
    for state in slot_reasons.COUNTED_STATES:
        name = f"inferwatch_{state}_slots_total"
        help_text = (
            "Dispatched slots that ended with no run (our failure, not the provider's)"
            if state == "lost"
            else "Slots not run on purpose (too late, provider backing off, cap too narrow)"
        )
        out.family(name, "counter", f"{help_text}, by region and reason (all time).")
        for (s, region, reason), n in sorted(counts.items()):
            if s == state:
                out.sample(name, labels(("region", "reason"), (region, reason)), n)


_anonymous_body: SharedResult[bytes] = SharedResult()


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    # Anonymous scrapers share one rendering per PUBLIC_SURFACE_CACHE_S (a flood renders
    # once); a bearer-token scraper or a signed-in user gets a fresh one.
    if bearer_token_ok(request) or request.user.is_authenticated:
        body = render()
    else:
        body = _anonymous_body.get(settings.PUBLIC_SURFACE_CACHE_S, render)
    packed = compressed(body, request.headers.get("Accept-Encoding", ""))
    response = HttpResponse(packed or body, content_type=CONTENT_TYPE)
    response["Vary"] = "Accept-Encoding"
    if packed is not None:
        response["Content-Encoding"] = "gzip"
    return response
