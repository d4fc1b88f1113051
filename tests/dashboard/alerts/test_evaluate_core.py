"""The decision core, without a database."""

import pytest

from dashboard.alerts.evaluate import Action, Condition, Health, Stats, decide, judge

REGRESSION_50 = Condition(metric="ttft_ms", kind="regression", regression_pct=50, min_samples=5)


def test_it_breaches_when_latency_is_worse_than_baseline_by_more_than_the_percentage():
    verdict = judge(REGRESSION_50, Stats(10, 301), Stats(100, 200))
    assert verdict.health is Health.BREACHED
    assert verdict.limit == 300


def test_it_stays_healthy_when_latency_is_worse_by_less_than_the_percentage():
    assert judge(REGRESSION_50, Stats(10, 299), Stats(100, 200)).health is Health.HEALTHY


def test_it_treats_lower_speed_as_worse():
    speed = Condition(metric="output_tps", kind="regression", regression_pct=30, min_samples=1)
    assert judge(speed, Stats(5, 250), Stats(50, 400)).health is Health.BREACHED
    assert judge(speed, Stats(5, 900), Stats(50, 400)).health is Health.HEALTHY


def test_it_fires_a_threshold_on_success_rate_below_it():
    availability = Condition(metric="success_rate", kind="threshold", threshold=0.95)
    assert judge(availability, Stats(20, 0.9)).health is Health.BREACHED
    assert judge(availability, Stats(20, 0.96)).health is Health.HEALTHY


def test_a_firing_alert_stays_open_until_the_value_is_clearly_back_inside_the_limit():
    # Limit 300 ms: 299 ms would not fire a new alert, but does not clear an open one.
    assert judge(REGRESSION_50, Stats(10, 299), Stats(100, 200)).health is Health.HEALTHY
    assert (
        judge(REGRESSION_50, Stats(10, 299), Stats(100, 200), firing=True).health is Health.BREACHED
    )
    assert (
        judge(REGRESSION_50, Stats(10, 280), Stats(100, 200), firing=True).health is Health.HEALTHY
    )


def test_speed_alerts_clear_above_the_limit_too():
    speed = Condition(metric="output_tps", kind="threshold", threshold=1000, min_samples=1)
    assert judge(speed, Stats(5, 1020), firing=True).health is Health.BREACHED
    assert judge(speed, Stats(5, 1060), firing=True).health is Health.HEALTHY


def test_it_says_nothing_with_too_few_recent_samples():
    verdict = judge(REGRESSION_50, Stats(4, 10_000), Stats(100, 200))
    assert verdict.health is Health.UNKNOWN
    assert "4 recent samples" in verdict.reason


def test_it_says_nothing_without_a_baseline():
    assert judge(REGRESSION_50, Stats(10, 10_000), Stats(0, None)).health is Health.UNKNOWN


@pytest.mark.parametrize(
    ("is_open", "health", "action"),
    [
        (False, Health.BREACHED, Action.FIRE),
        (True, Health.BREACHED, Action.REFRESH),
        (True, Health.HEALTHY, Action.RESOLVE),
        (False, Health.HEALTHY, Action.NOTHING),
        (True, Health.UNKNOWN, Action.NOTHING),
        (False, Health.UNKNOWN, Action.NOTHING),
    ],
)
def test_it_decides_transitions_from_state_and_verdict(is_open, health, action):
    verdict = judge(REGRESSION_50, Stats(10, 1), Stats(10, 1))
    verdict = type(verdict)(health, verdict.recent, verdict.baseline, verdict.limit, "")
    assert decide(is_open, verdict) is action


def test_it_rejects_a_condition_it_cannot_evaluate():
    with pytest.raises(ValueError, match="unknown metric"):
        Condition(metric="cost_usd", kind="threshold", threshold=1)
    with pytest.raises(ValueError, match="percentage"):
        Condition(metric="ttft_ms", kind="regression", regression_pct=None)
