"""The read side agrees with the raw runs, whichever storage answers each hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboard.models import RunRollup
from dashboard.queries import aggregates, lifetime, resolution
from dashboard.queries import filters as query_filters
from dashboard.queries import history as endpoint_history
from dashboard.queries import leaderboard as leaderboards
from probes.models import ProbeRun

from .conftest import make_run


def raw_ok(endpoint, since: datetime, field: str) -> list[float]:
    runs = ProbeRun.objects.filter(endpoint=endpoint, started_at__gte=since, status="ok")
    if field == "output_tps":
        runs = runs.filter(short_output=False)
    return list(runs.values_list(field, flat=True))


def board(**params) -> leaderboards.Leaderboard:
    return leaderboards.leaderboard(query_filters.parse_filters(params))


def row_for(b: leaderboards.Leaderboard, endpoint) -> leaderboards.Row:
    return next(r for r in b.rows if r.endpoint.pk == endpoint.pk)


@pytest.mark.parametrize("window", ["1h", "24h", "72h", "7d"])
def test_it_counts_every_run_in_the_window_exactly_once(history, window):
    fast = history["endpoints"]["fast"]
    now = timezone.now()
    plan = aggregates.plan_window(now - aggregates.LEADERBOARD_WINDOWS[window], now)
    start = plan.rollups[0][1] if plan.rollups else plan.raw_from
    expected = ProbeRun.objects.filter(endpoint=fast, started_at__gte=start).count()
    row = row_for(board(window=window), fast)
    assert row.samples == expected
    assert row.success_rate == pytest.approx(
        ProbeRun.objects.filter(endpoint=fast, started_at__gte=start, status="ok").count()
        / expected
    )


def test_its_medians_match_the_raw_runs_to_the_histogram_precision(history):
    fast = history["endpoints"]["fast"]
    now = timezone.now()
    start = aggregates.floor_hour(now - timedelta(hours=72))
    row = row_for(board(window="72h"), fast)
    for field in ("output_tps", "ttft_ms", "e2e_ms"):
        values = sorted(raw_ok(fast, start, field))
        # Nearest-rank median, as the histogram reads it; buckets are ±1.2 % wide.
        true = values[(len(values) + 1) // 2 - 1]
        assert row.p(field) == pytest.approx(true, rel=0.013), field


def test_the_72h_window_reads_daily_rollups_for_whole_days():
    now = datetime(2025, 3, 10, 14, 25, tzinfo=UTC)
    plan = aggregates.plan_window(now - timedelta(hours=72), now)
    assert plan.rollups == [
        (RunRollup.HOUR, datetime(2025, 3, 7, 14, tzinfo=UTC), datetime(2025, 3, 8, tzinfo=UTC)),
        (RunRollup.DAY, datetime(2025, 3, 8, tzinfo=UTC), datetime(2025, 3, 10, tzinfo=UTC)),
        (RunRollup.HOUR, datetime(2025, 3, 10, tzinfo=UTC), datetime(2025, 3, 10, 13, tzinfo=UTC)),
    ]
    assert plan.raw_from == datetime(2025, 3, 10, 13, tzinfo=UTC)


def test_the_one_hour_window_reads_raw_runs_only():
    now = datetime(2025, 3, 10, 14, 25, tzinfo=UTC)
    plan = aggregates.plan_window(now - timedelta(hours=1), now)
    assert plan.rollups == []
    assert plan.raw_from == now - timedelta(hours=1)


def test_it_ranks_by_median_output_speed_and_puts_endpoints_without_data_last(history):
    silent = history["endpoints"]["oss"]
    ProbeRun.objects.filter(endpoint=silent).delete()
    RunRollup.objects.filter(endpoint=silent).delete()
    rows = board().rows
    assert [r.endpoint.model_id for r in rows] == [
        "llama-3.3-70b",
        "sim-fast",
        "llama-3.3-70b-versatile",
        "openai/gpt-oss-120b",
    ]
    assert rows[-1].samples == 0 and rows[-1].output_tps is None


def test_sorting_ascending_by_ttft_keeps_rows_without_values_last(history):
    rows = board(sort="ttft_ms").rows
    ttfts = [r.ttft_ms for r in rows]
    assert ttfts == sorted(ttfts)
    assert rows[0].endpoint.model_id == "sim-fast"


def test_failed_and_short_runs_stay_out_of_speed_statistics(catalog):
    endpoint, workload = catalog["endpoints"]["mid"], catalog["workload"]
    make_run(endpoint, workload, ago=timedelta(minutes=5), output_tps=300.0)
    make_run(endpoint, workload, ago=timedelta(minutes=6), output_tps=9999.0, short_output=True)
    make_run(endpoint, workload, ago=timedelta(minutes=7), status="timeout_stall")
    row = row_for(board(window="1h"), endpoint)
    assert row.samples == 3
    assert row.success_rate == pytest.approx(2 / 3)
    assert row.output_tps == pytest.approx(300, rel=0.013)
    assert row.ttft_ms is not None  # the short run keeps its TTFT


def test_the_claim_is_shown_beside_the_measurement(history):
    row = row_for(board(), history["endpoints"]["fast"])
    (claim,) = row.claims
    measured = row.output_tps
    assert str(
        claim
    ) == f"claimed 2,100 · measured {measured:,.0f} · {measured / 2100:.0%}".replace("%", " %")


def test_a_price_in_force_today_wins_over_an_older_one(catalog):
    from datetime import date

    from probes.models import Price

    endpoint = catalog["endpoints"]["fast"]
    Price.objects.create(
        endpoint=endpoint, effective_from=date.today(), input_per_m=1, output_per_m=2
    )
    Price.objects.create(
        endpoint=endpoint,
        effective_from=date.today() + timedelta(days=5),
        input_per_m=9,
        output_per_m=9,
    )
    assert leaderboards.current_prices([endpoint.pk])[endpoint.pk].blended_per_m == 1.25


@pytest.mark.parametrize(
    "params, message",
    [
        ({"window": "2h"}, "Unknown window '2h'"),
        ({"model": "nope"}, "Unknown model 'nope'"),
        ({"workload": "nope"}, "Unknown workload 'nope'"),
        ({"region": "mars"}, "Unknown region 'mars'"),
        ({"sort": "-colour"}, "Unknown sort 'colour'"),
    ],
)
def test_unknown_filter_values_are_refused_with_the_accepted_values(catalog, params, message):
    with pytest.raises(query_filters.BadFilter, match=message) as error:
        query_filters.parse_filters(params)
    assert "Use one of:" in str(error.value)


def test_history_gives_daily_bands_beyond_a_week(history, monkeypatch):
    # More runs than a chart draws one by one (the limit lowered below four days of
    # hourly runs), and more hours in 30 d than that: daily points.
    monkeypatch.setattr(resolution, "MAX_POINTS", 50)
    (h,) = endpoint_history.history([history["endpoints"]["fast"]], window="30d")
    assert h.resolution == "day"
    points = h.series["output_tps"]
    assert 4 <= len(points) <= 6  # four days of runs, daily buckets
    for p in points:
        assert p.p25 <= p.p50 <= p.p75
    assert (
        sum(p.samples for p in points)
        == ProbeRun.objects.filter(endpoint=history["endpoints"]["fast"], status="ok").count()
    )


def test_rollup_reads_are_memoised_for_a_minute_and_raw_runs_never_are(history, monkeypatch):
    from dashboard import rollups

    fast, workload = history["endpoints"]["fast"], history["workload"]
    before = row_for(board(window="72h"), fast).samples

    recent = make_run(fast, workload, ago=timedelta(minutes=1))  # raw tail: always fresh
    assert row_for(board(window="72h"), fast).samples == before + 1
    recent.delete()
    assert row_for(board(window="72h"), fast).samples == before  # the memo was not modified

    late = make_run(fast, workload, ago=timedelta(hours=30))  # lands in a rolled-up hour
    rollups.recompute_span(late.started_at, late.started_at + timedelta(seconds=1))
    assert row_for(board(window="72h"), fast).samples == before  # memoised read
    later = aggregates._clock() + aggregates.MEMO_SECONDS + 1
    monkeypatch.setattr(aggregates, "_clock", lambda: later)
    assert row_for(board(window="72h"), fast).samples == before + 1


# -- window snapshots (dashboard/snapshots.py) ---------------------------------------------


def figures(b: leaderboards.Leaderboard) -> dict:
    """Everything a leaderboard row shows that comes from runs."""
    return {
        r.endpoint.pk: (
            r.samples,
            r.agg.ok_runs,
            r.last_run,
            r.agg.status_counts,
            {m: r.agg.percentiles(m) for m in ("output_tps", "ttft_ms", "ttfat_ms", "e2e_ms")},
            [(p.t, p.value) for p in r.sparkline],
        )
        for r in b.rows
    }


@pytest.mark.parametrize("window", ["24h", "72h", "7d", "30d"])
def test_a_snapshot_gives_the_very_figures_the_rollups_give(history, window):
    from dashboard import snapshots

    now = timezone.now()
    filters = query_filters.parse_filters({"window": window})
    from_rollups = figures(leaderboards.leaderboard(filters, now=now))

    snapshots.build(window, now)
    plan = aggregates.plan_window(now - aggregates.LEADERBOARD_WINDOWS[window], now)
    assert aggregates.snapshot_window(plan) == window  # the snapshot is what answers now
    assert figures(leaderboards.leaderboard(filters, now=now)) == from_rollups
    assert any(points for *_, points in from_rollups.values())


def test_a_snapshot_serves_one_region_and_every_grouping_of_metrics(history):
    from dashboard import snapshots

    now = timezone.now()
    board_filters = query_filters.parse_filters({"window": "72h", "region": "eu-west"})
    start = now - timedelta(hours=72)
    by_series = ("endpoint", "workload", "region")
    before = aggregates.collect(Q(), start, now, group_by=by_series)
    before_board = figures(leaderboards.leaderboard(board_filters, now=now))

    snapshots.build("72h", now)
    after = aggregates.collect(Q(), start, now, group_by=by_series)
    assert {k: (a.runs, a.hists) for k, a in after.items()} == {
        k: (a.runs, a.hists) for k, a in before.items()
    }
    assert figures(leaderboards.leaderboard(board_filters, now=now)) == before_board


def test_runs_newer_than_the_snapshot_count_at_once(history):
    from dashboard import snapshots

    fast, workload = history["endpoints"]["fast"], history["workload"]
    snapshots.refresh()
    before = row_for(board(window="30d"), fast).samples
    make_run(fast, workload, ago=timedelta(minutes=1))
    assert row_for(board(window="30d"), fast).samples == before + 1


def test_a_late_run_in_an_old_hour_retires_the_snapshots_that_read_it(history):
    from dashboard import rollups, snapshots
    from dashboard.models import SnapshotBuild

    fast, workload = history["endpoints"]["fast"], history["workload"]
    snapshots.refresh()
    before = row_for(board(window="72h"), fast).samples

    late = make_run(fast, workload, ago=timedelta(hours=30))
    rollups.recompute_span(late.started_at, late.started_at + timedelta(seconds=1))

    assert not SnapshotBuild.objects.filter(window="72h").exists()
    assert row_for(board(window="72h"), fast).samples == before + 1  # read from rollups
    assert "72h" in snapshots.refresh()
    assert row_for(board(window="72h"), fast).samples == before + 1  # and from the snapshot


def test_the_minute_by_minute_rollup_sweep_keeps_snapshots_current(history):
    from dashboard import rollups, snapshots
    from dashboard.models import SnapshotBuild

    now = timezone.now()
    every_one = ["24h", "72h", "7d", "30d", "lifetime"]
    assert snapshots.refresh(now) == every_one
    rollups.refresh(now=now)  # the newest hours and today: after every snapshot's end
    assert SnapshotBuild.objects.count() == 5
    assert snapshots.refresh(now) == []
    assert snapshots.refresh(now + timedelta(hours=1)) == every_one


def test_lifetime_counters_read_from_the_snapshot_match_the_rollups(history):
    from dashboard import snapshots

    now = timezone.now()
    from_rollups = lifetime.totals(now)
    fast = history["endpoints"]["fast"]
    snapshots.build_lifetime(now)
    aggregates.clear_memo()
    with CaptureQueriesContext(connection) as sql:
        from_snapshot = lifetime.totals(now)
    assert not any("jsonb_each_text" in q["sql"] for q in sql.captured_queries)
    assert {s: t.status_counts for s, t in from_snapshot.items()} == {
        s: t.status_counts for s, t in from_rollups.items()
    }
    series = (fast.pk, history["workload"].pk, "eu-west")
    runs = sum(from_snapshot[series].status_counts.values())
    assert runs == ProbeRun.objects.filter(endpoint=fast).count()


def test_the_memo_hands_every_caller_its_own_copy():
    aggregates.clear_memo()
    computed = []

    def compute():
        computed.append(1)
        return {("k",): aggregates.Agg(runs=1)}

    first = aggregates.memoised(("copies",), compute, aggregates.copy_aggregates)
    first[("k",)].runs += 10  # a caller adds its raw tail to what it got
    second = aggregates.memoised(("copies",), compute, aggregates.copy_aggregates)

    assert computed == [1]
    assert second[("k",)].runs == 1
    aggregates.clear_memo()
