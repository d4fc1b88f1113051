"""/metrics: Prometheus exposition of what the pages show, for Grafana users.

Computed at scrape time from the database (no in-process counters: several web workers
would each hold a part). Run counters come from rollups, which outlive raw-run retention,
so they never go down.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from dashboard.definitions import METRICS
from dashboard.models import ROLLUP_METRICS, SnapshotBuild, WindowSnapshot
from dashboard.queries import aggregates
from dashboard.queries.aggregates import (
    LIFETIME,
    Series,
    lifetime_counts_from_rollups,
    lifetime_plan,
    memoised,
)
from probes.models import Endpoint, Probe, ProbeRun, Workload
from probes.scheduling import ledger

MEDIAN_WINDOW = timedelta(hours=24)
LABELS = ["provider", "model", "endpoint", "workload", "region", "simulated"]


class InferwatchCollector(Collector):
    def collect(self) -> Iterator:
        now = timezone.now()
        endpoints = {
            e.pk: e for e in Endpoint.objects.select_related("provider", "canonical_model")
        }
        workloads = dict(Workload.objects.values_list("pk", "slug"))

        def labels(endpoint_id: int, workload_id: int, region: str) -> list[str] | None:
            e = endpoints.get(endpoint_id)
            if e is None:
                return None
            return [
                e.provider.slug,
                e.canonical_model.slug,
                e.model_id,
                workloads.get(workload_id, str(workload_id)),
                region,
                str(e.provider.simulated).lower(),
            ]

        recent = aggregates.collect(
            Q(), now - MEDIAN_WINDOW, now, group_by=("endpoint", "workload", "region")
        )
        medians = {
            m: GaugeMetricFamily(
                f"inferwatch_{m}_median",
                f"Median {METRICS[m].label} ({METRICS[m].unit}) over the last 24 h.",
                labels=LABELS,
            )
            for m in ROLLUP_METRICS
        }
        success = GaugeMetricFamily(
            "inferwatch_success_rate",
            "Runs with status ok / all runs over the last 24 h (0–1).",
            labels=LABELS,
        )
        valid = GaugeMetricFamily(
            "inferwatch_valid_share",
            "Checked answers (JSON, tool calls) that were valid / all checked, last 24 h (0–1).",
            labels=LABELS,
        )
        samples = GaugeMetricFamily(
            "inferwatch_samples", "Runs over the last 24 h, failed ones included.", labels=LABELS
        )
        for (key, _), agg in recent.items():
            names = labels(*key)
            if names is None:
                continue
            for m, family in medians.items():
                value = agg.percentile(m, 50)
                if value is not None:
                    family.add_metric(names, value)
            if agg.success_rate is not None:
                success.add_metric(names, agg.success_rate)
            if agg.valid_share is not None:
                valid.add_metric(names, agg.valid_share)
            samples.add_metric(names, agg.runs)
        yield from medians.values()
        yield success
        yield valid
        yield samples

        runs = CounterMetricFamily(
            "inferwatch_runs",
            "Runs recorded, by status (all time).",
            labels=[*LABELS, "status"],
        )
        for key, counts in lifetime_status_counts(now).items():
            names = labels(*key)
            if names is None:
                continue
            for status, n in sorted(counts.items()):
                runs.add_metric([*names, status], n)
        yield runs

        lag = GaugeMetricFamily(
            "inferwatch_probe_lag_seconds",
            "How far behind its schedule each active probe is (0 when on time).",
            labels=LABELS,
        )
        for probe, seconds in probe_lag_seconds(now):
            names = labels(probe.endpoint_id, probe.workload_id, probe.region)
            if names is not None:
                lag.add_metric(names, seconds)
        yield lag

        # Our own failures (a worker died, a queue backed up), kept apart from the
        # providers' runs: see probes/scheduling/ledger.py.
        lost = GaugeMetricFamily(
            "inferwatch_lost_slots",
            "Dispatched slots that ended with no run in the last 24 h, per region.",
            labels=["region"],
        )
        for region, n in lost_slots_by_region(now - MEDIAN_WINDOW):
            lost.add_metric([region], n)
        yield lost


# -- what the collector reads -----------------------------------------------------------------


def lifetime_status_counts(now: datetime | None = None) -> dict[Series, dict[str, int]]:
    """Runs ever recorded by status, per endpoint × workload × region (/metrics counters).

    Read from rollups, which outlive raw-run retention, so counters never go down: from
    the lifetime snapshot (one row per series, dashboard/snapshots.py) while it matches,
    else summed from every rollup row.
    """
    now = now or timezone.now()
    plan = lifetime_plan(now)
    totals = None
    if (
        plan.rollups
        and SnapshotBuild.objects.filter(
            window=LIFETIME, covers_from=plan.rollups[0][1], covers_to=plan.raw_from
        ).exists()
    ):
        rows = WindowSnapshot.objects.filter(window=LIFETIME).values_list(
            "endpoint_id", "workload_id", "region", "status_counts"
        )
        totals = {(e, w, r): dict(counts) for e, w, r, counts in rows}
    if totals is None:
        totals = memoised(
            ("lifetime", tuple(plan.rollups)),
            lambda: lifetime_counts_from_rollups(plan),
            lambda memo: {series: dict(counts) for series, counts in memo.items()},
        )
    recent = (
        ProbeRun.objects.filter(started_at__gte=plan.raw_from, started_at__lte=now)
        .exclude(role="step")
        .values_list("endpoint_id", "workload_id", "region", "status")
        .annotate(n=Count("id"))
        .order_by()
    )
    for endpoint_id, workload_id, region, status, n in recent:
        counts = totals.setdefault((endpoint_id, workload_id, region), {})
        counts[status] = counts.get(status, 0) + n
    return totals


def lost_slots_by_region(since: datetime) -> list[tuple[str, int]]:
    """(region, lost slots) since `since`: every region active probes run from (0 when it
    lost none, so an alert on the series has a series to watch), and any that lost some."""
    counts = dict.fromkeys(Probe.objects.active().values_list("region", flat=True), 0)
    for row in ledger.lost_since(since).values("region").annotate(n=Count("pk")):
        counts[row["region"]] = row["n"]
    return sorted(counts.items())


def probe_lag_seconds(now: datetime | None = None) -> list[tuple[Probe, float]]:
    """How far behind schedule each active probe is (0 when on time)."""
    now = now or timezone.now()
    probes = Probe.objects.active().select_related(
        "endpoint__provider", "endpoint__canonical_model", "workload"
    )
    return [(p, max(0.0, (now - p.next_run_at).total_seconds())) for p in probes]


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(InferwatchCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
