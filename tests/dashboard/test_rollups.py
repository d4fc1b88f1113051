"""Rollups agree with the raw runs they summarise, merge across buckets, and survive pruning."""

from __future__ import annotations

import math
import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from dashboard import histogram, rollups
from dashboard.models import RunRollup
from dashboard.queries import aggregates
from probes.models import ProbeRun
from probes.platform.timefloors import floor_hour
from probes.recording import retention

# The probe fixtures (a real simulator and catalog rows) of the probes tests.
from tests.probes.conftest import clean_redis, make_probe, sim, workload  # noqa: F401

DAY0 = datetime(2026, 5, 1, tzinfo=UTC)


def add_runs(probe, start, hours, per_hour, rng, **overrides):
    runs = []
    for h in range(hours):
        for i in range(per_hour):
            ok = rng.random() > 0.1
            tokens = rng.choice([20, 300, 400])
            fields = {
                "probe": probe,
                "endpoint_id": probe.endpoint_id,
                "workload_id": probe.workload_id,
                "region": probe.region,
                "started_at": start + timedelta(hours=h, minutes=i * 60 / per_hour),
                "run_group": uuid.uuid4(),
                "status": "ok" if ok else "server_error",
                "methodology_version": "1",
                "ttft_ms": rng.lognormvariate(math.log(300), 0.5) if ok else None,
                "ttfat_ms": rng.lognormvariate(math.log(350), 0.5) if ok else None,
                "e2e_ms": rng.lognormvariate(math.log(3000), 0.3) if ok else None,
                "output_tps": rng.lognormvariate(math.log(150), 0.2) if ok else None,
                "output_tokens": tokens if ok else None,
                "short_output": ok and tokens < 50,
            } | overrides
            runs.append(ProbeRun(**fields))
    ProbeRun.objects.bulk_create(runs)
    return runs


def raw_percentile(values, q):
    values = sorted(values)
    return values[max(1, math.ceil(q / 100 * len(values))) - 1]


def within_a_bucket(read_back, true):
    # A percentile read from a bucket's middle is within half a bucket (±1.2 %).
    return abs(math.log10(read_back) - math.log10(true)) <= histogram._LOG_STEP


@pytest.mark.django_db
def test_postgres_buckets_samples_exactly_as_the_python_histogram_does(make_probe):
    rng = random.Random(7)
    values = [rng.lognormvariate(math.log(200), 2) for _ in range(3000)]
    values += [0.005, 0.01, 1.0, 10.0, 100.0, 1000.0, 10**0.37]
    values += [-0.005, -0.01, -0.011, -1.0, -37.5, -(10**0.37)]  # signed: saved %
    with connection.cursor() as cursor:
        sql = rollups._BUCKET_SQL.replace("m.v", "v")
        cursor.execute(f"SELECT {sql} FROM unnest(%s::float8[]) AS v", [values])
        in_sql = [row[0] for row in cursor.fetchall()]
    assert in_sql == [histogram.bucket_of(v) for v in values]


@pytest.mark.django_db
def test_rollup_percentiles_match_raw_percentiles_within_a_bucket(make_probe):
    probe = make_probe()
    runs = add_runs(probe, DAY0, hours=48, per_hour=12, rng=random.Random(1))
    rollups.rebuild(DAY0, DAY0 + timedelta(days=2))

    hours = RunRollup.objects.filter(granularity="hour")
    days = RunRollup.objects.filter(granularity="day")
    assert hours.count() == 48 and days.count() == 2
    ok = [r for r in runs if r.status == "ok"]
    for metric in ("ttft_ms", "e2e_ms"):
        merged_hours = histogram.merge(getattr(r, f"hist_{metric}") for r in hours)
        merged_days = histogram.merge(getattr(r, f"hist_{metric}") for r in days)
        assert merged_hours == merged_days  # 48 hours merge into exactly the 2 days
        for q in (5, 25, 50, 75, 95):
            true = raw_percentile([getattr(r, metric) for r in ok], q)
            assert within_a_bucket(histogram.percentile(merged_days, q), true), (metric, q)
    speeds = [r.output_tps for r in ok if not r.short_output]
    merged_tps = histogram.merge(r.hist_output_tps for r in days)
    assert histogram.count(merged_tps) == len(speeds)  # short runs left out of speed
    assert within_a_bucket(histogram.percentile(merged_tps, 50), raw_percentile(speeds, 50))


@pytest.mark.django_db
def test_counts_include_failures_and_histograms_only_ok_runs(make_probe):
    probe = make_probe()
    runs = add_runs(probe, DAY0, hours=1, per_hour=30, rng=random.Random(2))
    rollups.recompute_span(DAY0, DAY0 + timedelta(hours=1))

    row = RunRollup.objects.get(granularity="hour")
    failed = sum(r.status != "ok" for r in runs)
    assert failed > 0
    assert row.runs == 30 and row.ok_runs == 30 - failed
    assert row.status_counts == {"ok": 30 - failed, "server_error": failed}
    assert histogram.count(row.hist_ttft_ms) == 30 - failed
    assert row.sum_output_tokens == sum(r.output_tokens or 0 for r in runs)


@pytest.mark.django_db
def test_client_bound_runs_are_counted_and_left_out_of_every_histogram(make_probe):
    """The rollup counts the ok runs our client may have set, as the raw tail does, so a
    board over any window can say how many it left out (dashboard/queries/ranking.py)."""
    probe = make_probe()
    runs = add_runs(probe, DAY0, hours=1, per_hour=30, rng=random.Random(5))
    ok = [r for r in runs if r.status == "ok"]
    bound = ok[:7]
    ProbeRun.objects.filter(pk__in=[r.pk for r in bound]).update(client_bound=True)
    rollups.recompute_span(DAY0, DAY0 + timedelta(hours=1))

    row = RunRollup.objects.get(granularity="hour")
    assert row.client_bound_runs == 7
    assert histogram.count(row.hist_ttft_ms) == len(ok) - 7
    plan = aggregates.plan_window(DAY0, DAY0 + timedelta(hours=3))
    scope = aggregates.Q(endpoint_id=probe.endpoint_id)
    figures = aggregates.rollup_aggregates(scope, plan, ("endpoint_id",), "none", ("ttft_ms",))
    (agg,) = figures.values()
    assert agg.client_bound_runs == 7 and agg.counted("ttft_ms") == len(ok) - 7


@pytest.mark.django_db
def test_recomputing_is_idempotent_and_picks_up_a_late_run(make_probe):
    probe = make_probe()
    add_runs(probe, DAY0, hours=3, per_hour=4, rng=random.Random(3))
    rollups.rebuild(DAY0, DAY0 + timedelta(days=1))
    rollups.rebuild(DAY0, DAY0 + timedelta(days=1))
    assert RunRollup.objects.get(granularity="day").runs == 12
    assert RunRollup.objects.filter(granularity="hour").count() == 3
    later = DAY0 + timedelta(days=3)
    rollups.refresh(now=later)
    rollups.refresh(now=later)  # the runs above are read twice (see new_run_buckets)
    assert rollups.refresh(now=later) == 0  # then nothing is new

    # A run of an old hour arrives late (written after the database came back): the
    # maintenance finds it by its id, with no word from the probe that wrote it.
    late_at = DAY0 + timedelta(hours=1, minutes=30)
    add_runs(probe, late_at, hours=1, per_hour=1, rng=random.Random(4), status="timeout_total")

    assert rollups.refresh(now=later) == 1
    hour = RunRollup.objects.get(granularity="hour", bucket_start=DAY0 + timedelta(hours=1))
    assert hour.runs == 5 and hour.status_counts["timeout_total"] == 1
    assert RunRollup.objects.get(granularity="day").runs == 13


@pytest.mark.django_db
def test_a_run_that_committed_after_a_pass_read_higher_ids_is_still_rolled_up(make_probe):
    probe = make_probe()
    later = DAY0 + timedelta(days=3)
    rollups.refresh(now=later)
    (first,) = add_runs(probe, DAY0, hours=1, per_hour=1, rng=random.Random(5))
    assert rollups.refresh(now=later) == 1  # reads up to `first`
    # Another run drew a lower id but committed only after that pass read.
    (late,) = add_runs(probe, DAY0 + timedelta(hours=5), hours=1, per_hour=1, rng=random.Random(6))
    ProbeRun.objects.filter(pk=late.pk).update(id=first.pk - 1)

    rollups.refresh(now=later)

    assert RunRollup.objects.get(granularity="hour", bucket_start=DAY0 + timedelta(hours=5))


@pytest.mark.django_db
def test_pruning_deletes_old_raw_runs_in_batches_and_keeps_their_rollups(make_probe):
    probe = make_probe()
    add_runs(probe, DAY0, hours=2, per_hour=20, rng=random.Random(5))  # old
    add_runs(probe, DAY0 + timedelta(days=5), hours=1, per_hour=7, rng=random.Random(6))
    rollups.rebuild()
    batches = []

    deleted = retention.prune(DAY0 + timedelta(days=1), batch=15, progress=batches.append)

    assert deleted == 40
    assert batches == [15, 30, 40]
    assert ProbeRun.objects.count() == 7
    old_day = RunRollup.objects.get(granularity="day", bucket_start=DAY0)
    assert old_day.runs == 40
    # A full rebuild afterwards leaves the pruned days' rollups alone.
    rollups.rebuild()
    assert RunRollup.objects.get(granularity="day", bucket_start=DAY0).runs == 40


def test_the_retention_cutoff_is_a_whole_day(settings):
    settings.RAW_RUN_RETENTION_DAYS = 90
    now = datetime(2026, 6, 1, 15, 42, tzinfo=UTC)
    assert retention.cutoff(now) == datetime(2026, 3, 3, tzinfo=UTC)


@pytest.mark.django_db
def test_the_maintenance_task_merges_each_leaderboard_window_into_a_snapshot(
    make_probe,
):
    from dashboard.models import SnapshotBuild, WindowSnapshot
    from dashboard.tasks import maintain_rollups

    probe = make_probe()
    now = datetime.now(UTC)
    start = floor_hour(now) - timedelta(hours=30)
    runs = add_runs(probe, start, hours=30, per_hour=2, rng=random.Random(8))
    rollups.rebuild(start)

    maintain_rollups()

    windows = set(SnapshotBuild.objects.values_list("window", flat=True))
    assert windows == {"24h", "72h", "7d", "30d", "lifetime"}
    # The 72 h snapshot holds every run before the raw tail (the last hour and this one).
    covered = [r for r in runs if r.started_at < floor_hour(now) - timedelta(hours=1)]
    row = WindowSnapshot.objects.get(window="72h", region=WindowSnapshot.ALL_REGIONS)
    assert row.runs == len(covered)
    assert row.ok_runs == sum(r.status == "ok" for r in covered)
    assert histogram.count(row.hists["ttft_ms"]) == row.ok_runs
