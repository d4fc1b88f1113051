"""The decision core, without a database: significance, hysteresis, states."""

import random
from datetime import UTC, datetime, timedelta

import pytest

from dashboard import histogram
from dashboard.alerts.decide import (
    Action,
    Condition,
    Health,
    State,
    Stats,
    Timing,
    Verdict,
    judge,
    step,
)
from dashboard.alerts.defaults import CUSUM, MANN_WHITNEY

# The per-window significance test (the alternative to the default CUSUM).
REGRESSION_50 = Condition(
    metric="ttft_ms", kind="regression", regression_pct=50, min_samples=5, max_p_value=0.01,
    test=MANN_WHITNEY,
)  # fmt: skip
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def spread(center: float, n: int, jitter: float = 0.05, seed: int = 1) -> Stats:
    rnd = random.Random(seed)
    return Stats.of(center * rnd.uniform(1 - jitter, 1 + jitter) for _ in range(n))


def test_it_breaches_when_latency_is_clearly_and_significantly_worse():
    verdict = judge(REGRESSION_50, spread(400, 10), spread(200, 100, seed=2))
    assert verdict.health is Health.BREACHED
    assert verdict.limit == pytest.approx(verdict.baseline.value * 1.5)
    assert verdict.p_value < 1e-6
    assert verdict.effect == pytest.approx(verdict.recent.value / verdict.baseline.value - 1)


def test_it_stays_healthy_when_latency_is_worse_by_less_than_the_percentage():
    assert judge(REGRESSION_50, spread(260, 10), spread(200, 100)).health is Health.HEALTHY


def test_a_large_median_change_that_could_be_chance_does_not_fire():
    # Three runs past the limit, but the baseline is so noisy that such runs are common.
    noisy = Stats.of([100, 150, 200, 250, 300, 350, 400, 450, 500, 550] * 3)
    recent = Stats.of([380, 420, 520])
    condition = Condition(
        metric="ttft_ms", kind="regression", regression_pct=20, min_samples=3, test=MANN_WHITNEY
    )
    verdict = judge(condition, recent, noisy)
    assert recent.value > verdict.limit  # the old median-threshold rule would fire
    assert verdict.health is Health.HEALTHY
    assert verdict.p_value > 0.01 and "chance" in verdict.reason


def test_it_treats_lower_speed_as_worse():
    for test in (MANN_WHITNEY, CUSUM):
        speed = Condition(
            metric="output_tps", kind="regression", regression_pct=30, min_samples=3, test=test
        )
        assert judge(speed, spread(250, 5), spread(400, 50)).health is Health.BREACHED
        assert judge(speed, spread(900, 5), spread(400, 50)).health is Health.HEALTHY


def test_it_needs_enough_samples_on_both_sides():
    condition = Condition(
        metric="ttft_ms", kind="regression", regression_pct=50, min_samples=3,
        min_baseline_samples=20,
    )  # fmt: skip
    verdict = judge(condition, spread(900, 5), spread(200, 19))
    assert verdict.health is Health.UNKNOWN and "19 baseline samples, 20 needed" in verdict.reason
    assert judge(condition, spread(900, 2), spread(200, 50)).health is Health.UNKNOWN


def test_a_rollup_histogram_stands_in_for_the_baseline_samples():
    raw = spread(200, 500, jitter=0.1)
    from_rollup = Stats.of_histogram(histogram.build(raw.values))
    assert from_rollup.samples == 500
    assert from_rollup.value == pytest.approx(raw.value, rel=0.013)
    assert judge(REGRESSION_50, spread(400, 10), from_rollup).health is Health.BREACHED


def test_it_fires_a_threshold_on_success_rate_below_it():
    availability = Condition(metric="success_rate", kind="threshold", threshold=0.95)
    assert judge(availability, Stats.of_rate([True] * 9 + [False])).health is Health.BREACHED
    assert judge(availability, Stats.of_rate([True] * 99 + [False])).health is Health.HEALTHY


def test_error_rate_and_staleness_are_worse_when_higher():
    errors = Condition(metric="error_rate", kind="threshold", threshold=0.2)
    assert judge(errors, Stats.of_rate([True] * 3 + [False] * 7)).health is Health.BREACHED
    stale = Condition(metric="minutes_since_ok", kind="threshold", threshold=30)
    assert judge(stale, Stats(1, 45.0, (45.0,))).health is Health.BREACHED
    assert judge(stale, Stats(1, 10.0, (10.0,))).health is Health.HEALTHY


def test_a_firing_alert_stays_open_until_the_value_is_clearly_back_inside_the_limit():
    baseline = Stats.of([200.0] * 50)  # limit 300 ms, resolve margin 5 %: clear below 285
    assert judge(REGRESSION_50, Stats.of([299.0] * 6), baseline).health is Health.HEALTHY
    assert judge(REGRESSION_50, Stats.of([299.0] * 6), baseline, firing=True).health is (
        Health.BREACHED
    )
    assert judge(REGRESSION_50, Stats.of([280.0] * 6), baseline, firing=True).health is (
        Health.HEALTHY
    )


def test_the_resolve_margin_is_per_condition():
    wide = Condition(
        metric="ttft_ms", kind="regression", regression_pct=50, resolve_margin=0.2,
        test=MANN_WHITNEY,
    )  # fmt: skip
    baseline = Stats.of([200.0] * 50)  # limit 300, clear below 240
    assert judge(wide, Stats.of([250.0] * 6), baseline, firing=True).health is Health.BREACHED
    assert judge(wide, Stats.of([230.0] * 6), baseline, firing=True).health is Health.HEALTHY


def test_it_says_nothing_with_too_few_recent_samples():
    verdict = judge(REGRESSION_50, spread(10_000, 4), spread(200, 100))
    assert verdict.health is Health.UNKNOWN
    assert "4 recent samples" in verdict.reason


def test_it_says_nothing_without_a_baseline():
    assert judge(REGRESSION_50, spread(10_000, 10), Stats(0, None)).health is Health.UNKNOWN


def verdict_of(health: Health) -> Verdict:
    return Verdict(health, Stats(1, 1.0), None, 1.0, "")


@pytest.mark.parametrize(
    ("state", "health", "action"),
    [
        (State.OK, Health.BREACHED, Action.FIRE),
        (State.FIRING, Health.BREACHED, Action.REFRESH),
        (State.FIRING, Health.HEALTHY, Action.RESOLVE),
        (State.OK, Health.HEALTHY, Action.NOTHING),
        (State.FIRING, Health.UNKNOWN, Action.REFRESH),
        (State.OK, Health.UNKNOWN, Action.NOTHING),
    ],
)
def test_without_for_a_breach_fires_at_once(state, health, action):
    assert step(state, verdict_of(health), T0, Timing(), since=T0) is action


def test_with_for_a_breach_is_pending_until_it_lasted_that_long():
    timing = Timing(pending_for=timedelta(minutes=15))
    breached = verdict_of(Health.BREACHED)
    assert step(State.OK, breached, T0, timing) is Action.PEND
    later = T0 + timedelta(minutes=14)
    assert step(State.PENDING, breached, later, timing, since=T0) is Action.REFRESH
    later = T0 + timedelta(minutes=15)
    assert step(State.PENDING, breached, later, timing, since=T0) is Action.FIRE
    healthy = verdict_of(Health.HEALTHY)
    assert step(State.PENDING, healthy, later, timing, since=T0) is Action.CANCEL


def test_a_firing_alert_reminds_after_the_repeat_interval():
    timing = Timing(repeat_every=timedelta(hours=1))
    breached = verdict_of(Health.BREACHED)
    at = T0 + timedelta(minutes=59)
    assert step(State.FIRING, breached, at, timing, since=T0, last_notified=T0) is Action.REFRESH
    at = T0 + timedelta(hours=1)
    assert step(State.FIRING, breached, at, timing, since=T0, last_notified=T0) is Action.REMIND


def test_it_rejects_a_condition_it_cannot_evaluate():
    with pytest.raises(ValueError, match="unknown metric"):
        Condition(metric="cost_usd", kind="threshold", threshold=1)
    with pytest.raises(ValueError, match="percentage"):
        Condition(metric="ttft_ms", kind="regression", regression_pct=None)
    with pytest.raises(ValueError, match="max_p_value"):
        Condition(metric="ttft_ms", kind="regression", regression_pct=10, max_p_value=0)
