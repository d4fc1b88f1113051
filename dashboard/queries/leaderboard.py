"""The leaderboard: one row per endpoint for a window, with claims, prices and a speed
sparkline, sorted as asked."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db.models import Q
from django.utils import timezone

from dashboard.definitions import shares_by_cause
from dashboard.models import ROLLUP_METRICS, WindowSnapshot
from dashboard.queries import ranking
from dashboard.queries.aggregates import (
    ALL,
    FINE,
    HOUR,
    LEADERBOARD_WINDOWS,
    Agg,
    GroupKey,
    Plan,
    Scope,
    plan_window,
    rollup_aggregates,
    scope_of,
    snapshot_aggregates,
    snapshot_window,
    with_raw_tail,
)
from dashboard.queries.claims import ClaimVsMeasured, compared
from dashboard.queries.filters import Filters
from dashboard.queries.streams import per_stream_speeds
from probes.kinds.headline import headline_metrics, rank_metric
from probes.models import Endpoint, Price, Probe, Workload
from probes.scheduling import ledger


@dataclass
class Point:
    t: datetime
    value: float | None


@dataclass
class Row:
    endpoint: Endpoint
    agg: Agg
    blended_price: Decimal | None
    claims: list[ClaimVsMeasured]
    sparkline: list[Point]
    # The workload cannot fit the endpoint's context: shown greyed, never measured.
    not_applicable: bool = False
    # Place by the workload's rank metric (1 = best); None, with the reason, where the
    # window has no such figure for the row.
    rank: int | None = None
    unranked_reason: str = ""
    # Concurrent workloads: the median speed of one stream of the batch (streams.py).
    stream_tps: float | None = None

    @property
    def provider(self):
        return self.endpoint.provider

    @property
    def model(self):
        return self.endpoint.canonical_model

    @property
    def samples(self) -> int:
        return self.agg.runs

    @property
    def success_rate(self) -> float | None:
        return self.agg.success_rate

    @property
    def availability_by_cause(self) -> dict[str, float] | None:
        """Shares of the window's runs per cause: ok, rate-limited, 5xx, timeout, other."""
        return shares_by_cause(self.agg.status_counts)

    @property
    def last_run(self) -> datetime | None:
        return self.agg.last_run_at

    @property
    def approx_tokens_share(self) -> float | None:
        """Of the window's ok runs, the share counted without the provider's usage."""
        return self.agg.approx_tokens_share

    @property
    def left_out(self) -> int:
        """Ok runs left out of the latency and speed medians: our own client may have
        set their figures (client_bound). Counted in Samples, so the row says how many."""
        return self.agg.client_bound_runs

    @property
    def approx_tokens(self) -> bool:
        """Some of the window's token counts (and so its speed) are not from usage: ≈."""
        return self.agg.approx_token_runs > 0

    def p(self, metric: str, q: int = 50) -> float | None:
        return self.agg.percentile(metric, q)

    @property
    def output_tps(self) -> float | None:
        return self.p("output_tps")

    @property
    def ttft_ms(self) -> float | None:
        return self.p("ttft_ms")

    @property
    def ttfat_ms(self) -> float | None:
        return self.p("ttfat_ms")

    @property
    def e2e_ms(self) -> float | None:
        return self.p("e2e_ms")

    @property
    def prefill_tps(self) -> float | None:
        return self.p("prefill_tps")

    @property
    def valid_share(self) -> float | None:
        """Of the window's checked answers, the share that passed (JSON, tool calls)."""
        return self.agg.valid_share

    def sort_value(self, key: str):
        if key == "provider":
            return self.endpoint.provider.name.lower()
        if key == "model":
            return self.endpoint.canonical_model.name.lower()
        return self.figure(key)

    def figure(self, key: str):
        """A column's figure: a metric's median, a tail (``ttft_ms_p95``) or a row field."""
        if key in ROLLUP_METRICS:
            return self.p(key)  # the median, as its column shows
        metric, _, q = key.rpartition("_p")
        if metric in ROLLUP_METRICS and q.isdigit():
            return self.p(metric, int(q))
        return getattr(self, key)

    def as_dict(self) -> dict:
        """The API shape: metric names from metrics.md with percentile suffixes."""
        e = self.endpoint
        data: dict = {
            "endpoint_id": e.pk,
            "provider": e.provider.slug,
            "provider_name": e.provider.name,
            "simulated": e.provider.simulated,
            "model": e.canonical_model.slug,
            "model_name": e.canonical_model.name,
            "model_id": e.model_id,
            "not_applicable": self.not_applicable,
            "rank": self.rank,
            "unranked_reason": self.unranked_reason or None,
        }
        for metric in ROLLUP_METRICS:
            for q, value in self.agg.percentiles(metric).items():
                data[f"{metric}_p{q}"] = _round(value)
        data["stream_tps_p50"] = _round(self.stream_tps)
        data["blended_price_per_m"] = (
            None if self.blended_price is None else float(round(self.blended_price, 4))
        )
        data["success_rate"] = _round(self.success_rate, 4)
        by_cause = self.availability_by_cause
        data["availability_by_cause"] = (
            None if by_cause is None else {k: round(v, 4) for k, v in by_cause.items()}
        )
        data["approx_tokens"] = self.approx_tokens
        data["approx_tokens_share"] = _round(self.approx_tokens_share, 4)
        data["checked_runs"] = self.agg.checked_runs
        data["valid_runs"] = self.agg.valid_runs
        data["valid_share"] = _round(self.valid_share, 4)
        data["samples"] = self.samples
        data["ok_samples"] = self.agg.ok_runs
        data["client_bound_runs"] = self.left_out
        data["last_run_at"] = self.last_run.isoformat() if self.last_run else None
        for c in self.claims:
            data[f"claimed_{c.metric}"] = c.claim.value
            data[f"claimed_{c.metric}_high"] = c.claim.value_high
        return data


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def current_prices(endpoint_ids: Iterable[int], today=None) -> dict[int, Price]:
    """The price in force today per endpoint, in one query."""
    today = today or timezone.now().date()
    prices = (
        Price.objects.filter(endpoint_id__in=list(endpoint_ids), effective_from__lte=today)
        .order_by("endpoint_id", "-effective_from")
        .distinct("endpoint_id")
    )
    return {p.endpoint_id: p for p in prices}


def measured_claims(rows: list[Row]) -> None:
    """A claim is shown only beside a figure the board measures: a metric no row has a
    figure for (a speed claim on a board of answers too short for speed) is dropped; a
    row without a successful run shows no measured figure beside its claims."""
    measured = {c.metric for r in rows if r.agg.ok_runs for c in r.claims if c.measured is not None}
    for row in rows:
        row.claims = [c for c in row.claims if c.metric in measured]
        if not row.agg.ok_runs:
            for c in row.claims:
                c.measured = None


@dataclass
class Leaderboard:
    filters: Filters
    rows: list[Row]
    start: datetime
    now: datetime
    workload: Workload | None

    @property
    def has_data(self) -> bool:
        return any(r.samples for r in self.rows)

    @property
    def left_out(self) -> tuple[int, int]:
        """(runs left out as client-bound, runs) over every row: what the board says."""
        return sum(r.left_out for r in self.rows), sum(r.samples for r in self.rows)

    @property
    def concurrency(self) -> int:
        """Requests the board's workload runs at once: above one, no claim about one
        stream alone stands beside its figures (Claim.covers), and an empty cell says so."""
        return self.workload.concurrent_requests if self.workload else 1

    @property
    def rank_metric(self) -> str:
        """What this board ranks by (rank_metric): speed, TTFT, tool-call time…"""
        return rank_metric(self.workload) if self.workload else "output_tps"

    @property
    def headline_columns(self) -> frozenset[str]:
        """The workload's own columns (prefill for long prompts, first sentence for a voice
        turn, …): decided by its data, so the board stays as narrow as the workload allows."""
        return headline_metrics(self.workload) if self.workload else frozenset()


def leaderboard(filters: Filters, now: datetime | None = None) -> Leaderboard:
    now = now or timezone.now()
    start = now - LEADERBOARD_WINDOWS[filters.window]
    workload = Workload.objects.filter(slug=filters.workload).first() if filters.workload else None
    if workload is None:
        return Leaderboard(filters, [], start, now, None)
    model_endpoints = None
    if filters.model != ALL:
        model_endpoints = list(
            Endpoint.objects.filter(canonical_model__slug=filters.model).values_list(
                "pk", flat=True
            )
        )

    scope = scope_of(model_endpoints, workload, filters.region)
    figures = window_figures(filters.window, scope, filters.region, now)

    # The board is what is probed now: endpoints with an active probe for this workload,
    # silent ones included (an empty row says "probed, no data", which is news in
    # itself). A series whose probe was disabled or deleted leaves the board: its
    # history stays on the endpoint and model pages. Catalog endpoints of providers
    # without a key (disabled) are left out too.
    probed = Probe.objects.active().filter(workload=workload)
    # Endpoints whose context cannot hold the workload: one greyed "not applicable" row.
    too_small = Endpoint.objects.filter(enabled=True, provider__enabled=True).too_small_for(
        workload
    )
    if model_endpoints is not None:
        probed = probed.filter(endpoint_id__in=model_endpoints)
        too_small = too_small.filter(pk__in=model_endpoints)
    if filters.region != ALL:
        probed = probed.filter(region=filters.region)
    not_applicable = set(too_small.values_list("pk", flat=True))
    shown_ids = set(probed.values_list("endpoint_id", flat=True)) | not_applicable
    # Only the endpoints shown: a catalog may hold many more than one workload probes.
    shown = list(
        Endpoint.objects.select_related("provider", "canonical_model").filter(pk__in=shown_ids)
    )
    prices = current_prices(shown_ids, now.date())
    streams = per_stream_speeds(shown_ids - not_applicable, workload, start, now, filters.region)
    claims = compared(shown, workload, figures.totals, streams)
    rows = []
    for e in shown:
        if e.pk in not_applicable:
            continue
        agg = figures.totals.get(e.pk, Agg())
        rows.append(
            Row(
                endpoint=e,
                agg=agg,
                blended_price=prices[e.pk].blended_per_m if e.pk in prices else None,
                claims=claims[e.pk],
                sparkline=figures.sparklines.get(e.pk, []),
                stream_tps=streams.get(e.pk),
            )
        )
    rows += [
        Row(e, Agg(), None, [], [], not_applicable=True) for e in shown if e.pk in not_applicable
    ]
    # The one rule (queries/ranking.py): rank, order and each unranked row's reason.
    rows = ranking.rank(rows, rank_metric(workload), filters.sort_key, filters.descending)
    measured_claims(rows)
    return Leaderboard(filters, rows, start, now, workload)


# Skips older than this are history, not a reason shown beside an empty row.
SKIPS_SHOWN_FOR = timedelta(hours=24)


def skipped_slots(rows: list[Row], workload: str | None) -> dict[int, ledger.Skips]:
    """Skipped slots of the last day per row without runs, the latest reason in the slot
    vocabulary's words (probes/scheduling/outcomes.py): the board and its API say why."""
    unmeasured = [row.endpoint.pk for row in rows if not row.samples]
    scope = {"probe__workload__slug": workload} if workload else {}
    since = timezone.now() - SKIPS_SHOWN_FOR
    return ledger.skips_by("probe__endpoint_id", unmeasured, since, **scope)


def sparkline_bucket(window: str) -> str:
    """Even buckets so sparklines read evenly: hours up to three days, days beyond."""
    return "hour" if LEADERBOARD_WINDOWS[window] <= 72 * HOUR else "day"


@dataclass
class WindowFigures:
    """A leaderboard window's figures per endpoint and its per-bucket speed sparklines."""

    totals: dict[int, Agg]
    sparklines: dict[int, list[Point]]


def window_figures(window: str, scope: Scope, region: str, now: datetime) -> WindowFigures:
    """Figures and sparklines per endpoint, grouped over regions unless one is chosen.

    The rolled-up part comes from the window's snapshot when one matches (one row per
    series), else from rollups; the raw tail is read once, per sparkline bucket, and
    serves both the totals and the sparklines.
    """
    start = now - LEADERBOARD_WINDOWS[window]
    bucket = sparkline_bucket(window)
    fields = ("endpoint_id",)
    plan = plan_window(start, now)
    # Hourly boards read their raw tail in 5-minute points: the tail is all a 1 h board
    # (or a fresh install's 72 h board) has, and two hourly points draw only a diagonal.
    tail_bucket = FINE if bucket == "hour" else bucket
    tail = with_raw_tail({}, scope, plan.raw_from, now, fields, tail_bucket, ROLLUP_METRICS)

    base = snapshot_aggregates(scope, plan, fields, ROLLUP_METRICS)
    if base is None:
        base = rollup_aggregates(scope, plan, fields, "none", ROLLUP_METRICS)
        spark_plan = plan_window(start, now, use_days=bucket != "hour")
        spark_base = rollup_aggregates(scope, spark_plan, fields, bucket, ("output_tps",))
        finished: dict[int, list[Point]] = {}
    else:
        finished, spark_base = _snapshot_sparklines(scope, plan, region)

    totals = {key[0]: agg for (key, _), agg in base.items()}
    buckets = dict(spark_base)
    for key, agg in tail.items():
        (endpoint_id,), _ = key
        totals.setdefault(endpoint_id, Agg()).merge(agg)
        buckets.setdefault(key, Agg()).merge(agg)
    spark = {endpoint_id: list(points) for endpoint_id, points in finished.items()}
    for ((endpoint_id,), when), agg in sorted(buckets.items(), key=lambda kv: kv[0][1]):
        spark.setdefault(endpoint_id, []).append(Point(when, agg.percentile("output_tps", 50)))
    return WindowFigures(totals, spark)


def _snapshot_sparklines(
    scope: Scope, plan: Plan, region: str
) -> tuple[dict[int, list[Point]], dict[tuple[GroupKey, datetime | None], Agg]]:
    """Sparkline points of finished buckets, and the speed histogram of the bucket still
    filling (today, for daily points) to merge with the raw tail, from the snapshot."""
    window = snapshot_window(plan)
    rows = WindowSnapshot.objects.filter(
        scope & Q(region=WindowSnapshot.ALL_REGIONS) if region == ALL else scope,
        window=window,
    ).values_list("endpoint_id", "spark_points", "spark_open")
    finished: dict[int, list[Point]] = {}
    open_buckets: dict[tuple[GroupKey, datetime | None], Agg] = {}
    for endpoint_id, points, open_bucket in rows:
        finished[endpoint_id] = [Point(_from_epoch(t), value) for t, value in points]
        if open_bucket:
            agg = Agg()
            agg.add_hist("output_tps", open_bucket[1])
            open_buckets[((endpoint_id,), _from_epoch(open_bucket[0]))] = agg
    return finished, open_buckets


def _from_epoch(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
