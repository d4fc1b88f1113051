"""The read side agrees with the raw runs, whichever storage answers each hour."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from dashboard import queries
from dashboard.models import RunRollup
from probes.models import ProbeRun

from .conftest import make_run


def raw_ok(endpoint, since: datetime, field: str) -> list[float]:
    runs = ProbeRun.objects.filter(endpoint=endpoint, started_at__gte=since, status="ok")
    if field == "output_tps":
        runs = runs.filter(short_output=False)
    return list(runs.values_list(field, flat=True))


def board(**params) -> queries.Leaderboard:
    return queries.leaderboard(queries.parse_filters(params))


def row_for(b: queries.Leaderboard, endpoint) -> queries.Row:
    return next(r for r in b.rows if r.endpoint.pk == endpoint.pk)


@pytest.mark.parametrize("window", ["1h", "24h", "72h", "7d"])
def test_it_counts_every_run_in_the_window_exactly_once(history, window):
    fast = history["endpoints"]["fast"]
    now = timezone.now()
    plan = queries.plan_window(now - queries.LEADERBOARD_WINDOWS[window], now)
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
    start = queries.floor_hour(now - timedelta(hours=72))
    row = row_for(board(window="72h"), fast)
    for field in ("output_tps", "ttft_ms", "e2e_ms"):
        values = sorted(raw_ok(fast, start, field))
        # Nearest-rank median, as the histogram reads it; buckets are ±1.2 % wide.
        true = values[(len(values) + 1) // 2 - 1]
        assert row.p(field) == pytest.approx(true, rel=0.013), field


def test_the_72h_window_reads_daily_rollups_for_whole_days():
    now = datetime(2025, 3, 10, 14, 25, tzinfo=UTC)
    plan = queries.plan_window(now - timedelta(hours=72), now)
    assert plan.rollups == [
        (RunRollup.HOUR, datetime(2025, 3, 7, 14, tzinfo=UTC), datetime(2025, 3, 8, tzinfo=UTC)),
        (RunRollup.DAY, datetime(2025, 3, 8, tzinfo=UTC), datetime(2025, 3, 10, tzinfo=UTC)),
        (RunRollup.HOUR, datetime(2025, 3, 10, tzinfo=UTC), datetime(2025, 3, 10, 13, tzinfo=UTC)),
    ]
    assert plan.raw_from == datetime(2025, 3, 10, 13, tzinfo=UTC)


def test_the_one_hour_window_reads_raw_runs_only():
    now = datetime(2025, 3, 10, 14, 25, tzinfo=UTC)
    plan = queries.plan_window(now - timedelta(hours=1), now)
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
    assert queries.current_prices([endpoint.pk])[endpoint.pk].blended_per_m == 1.25


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
    with pytest.raises(queries.BadFilter, match=message) as error:
        queries.parse_filters(params)
    assert "Use one of:" in str(error.value)


def test_history_gives_daily_bands_beyond_a_week(history):
    (h,) = queries.history([history["endpoints"]["fast"]], window="30d")
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
    later = queries._clock() + queries.MEMO_SECONDS + 1
    monkeypatch.setattr(queries, "_clock", lambda: later)
    assert row_for(board(window="72h"), fast).samples == before + 1
