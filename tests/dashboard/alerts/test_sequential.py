"""The default regression test (CUSUM on clipped log-ratios) and the replay that scores it:
plain Python, no database."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from dashboard.alerts import sequential
from dashboard.alerts.decide import Condition, Health, State, Stats, Timing, judge, step
from dashboard.alerts.defaults import CUSUM, DEFAULT, MANN_WHITNEY
from dashboard.alerts.replay import Injected, Series, Windows, _apply, _spans, replay, score

SPEED = Condition(metric="output_tps", kind="regression", regression_pct=20, min_samples=3)
T0 = datetime(2026, 11, 2, tzinfo=UTC)
FIVE_MIN = 300.0


def lognormal(center: float, n: int, sigma: float = 0.1, seed: int = 1) -> list[float]:
    rnd = random.Random(seed)
    return [center * math.exp(rnd.gauss(0, sigma)) for _ in range(n)]


BASELINE = Stats.of(lognormal(1000, 144))


def test_the_default_condition_is_the_cusum():
    assert SPEED.test == CUSUM == DEFAULT.test


def test_one_or_two_runs_at_a_third_of_the_speed_never_fire():
    for bad in (1, 2):
        recent = lognormal(1000, 10, seed=3)
        recent[4 : 4 + bad] = [330.0] * bad
        verdict = judge(SPEED, Stats.of(recent), BASELINE)
        assert verdict.health is Health.HEALTHY, verdict.reason
    # The per-window median test of the same windows, on a three-run window, does fire:
    # two bad runs are its median.
    three = Stats.of([1000.0, 330.0, 330.0])
    median_only = Condition(
        metric="output_tps", kind="regression", regression_pct=20, min_samples=3,
        max_p_value=1.0, test=MANN_WHITNEY,
    )  # fmt: skip
    assert judge(median_only, three, BASELINE).health is Health.BREACHED
    assert judge(SPEED, three, BASELINE).health is Health.HEALTHY


def test_three_runs_30_percent_slower_fire():
    recent = lognormal(1000, 6, seed=4) + lognormal(700, 3, seed=5)
    verdict = judge(SPEED, Stats.of(recent), BASELINE)
    assert verdict.health is Health.BREACHED and "CUSUM" in verdict.reason


def test_a_lasting_10_percent_move_under_a_20_percent_rule_does_not_fire():
    """Each run of a −10 % move drains the sum (the allowance is 15 % under a 20 % rule).
    On a steady provider (5 % jitter) it never fires in a week of windows; with 10 %
    jitter, runs past the limit are common enough that a window rarely does (the
    benchmark's "steps" shape measures what that costs, before the move becomes the
    baseline)."""
    steady = lognormal(1000, 144, sigma=0.05, seed=2)
    moved = lognormal(900, 2000, sigma=0.05, seed=6)  # a week, a run every 5 minutes
    assert not any(
        sequential.evidence(moved[i : i + 12], steady, 20, False).fires()
        for i in range(len(moved) - 12)
    )
    moved = lognormal(900, 2000, seed=6)
    fired = sum(
        sequential.evidence(moved[i : i + 12], BASELINE.values, 20, False).fires()
        for i in range(len(moved) - 12)
    )
    assert fired < 0.01 * len(moved)


def test_the_limit_is_in_units_of_the_baselines_own_noise():
    slower = lognormal(780, 4, sigma=0.02, seed=7)  # 22 % slower, four runs
    steady = Stats.of(lognormal(1000, 144, sigma=0.03))
    jittery = Stats.of(lognormal(1000, 144, sigma=0.4))
    assert judge(SPEED, Stats.of(slower), steady).health is Health.BREACHED
    assert judge(SPEED, Stats.of(slower), jittery).health is Health.HEALTHY


def test_a_firing_alert_stays_until_the_evidence_drains_then_resolves():
    slow = lognormal(600, 6, sigma=0.05, seed=8)
    quiet = Stats.of(lognormal(1000, 144, sigma=0.05))
    assert judge(SPEED, Stats.of(slow), quiet).health is Health.BREACHED
    one_good = Stats.of(slow + [1000.0])
    assert judge(SPEED, one_good, quiet, firing=True).health is Health.BREACHED
    recovered = Stats.of(slow + lognormal(1000, 6, sigma=0.05, seed=9))
    assert judge(SPEED, recovered, quiet, firing=True).health is Health.HEALTHY


def _history(days: float, value_at, seed: int = 11) -> Series:
    rnd = random.Random(seed)
    times = [T0.timestamp() + i * FIVE_MIN for i in range(int(days * 288))]
    return Series(times, [value_at(t) * math.exp(rnd.gauss(0, 0.08)) for t in times])


DEFAULT_WINDOWS = Windows(
    timedelta(minutes=DEFAULT.recent_window_min), timedelta(hours=DEFAULT.baseline_window_h)
)


def test_a_persistent_step_change_becomes_the_baseline_after_the_documented_time():
    """A provider moving to a slower region for good (−35 %): one alert, resolved once the
    step fills half the baseline window, which starts a recent window back (4 h by
    default: README, Alerts), never firing again."""
    step_at = T0 + timedelta(days=2)
    series = _history(5, lambda t: 1000 if t < step_at.timestamp() else 650)
    condition = Condition(metric="output_tps", kind="regression", regression_pct=20)
    result = replay(
        series, condition, Timing(), DEFAULT_WINDOWS, T0 + timedelta(days=1), T0 + timedelta(days=5)
    )
    fired = [c for c in result.changes if c.state == "firing"]
    resolved = [c for c in result.changes if c.state == "resolved"]
    assert len(fired) == 1 and len(resolved) == 1, result.changes
    assert timedelta(0) < fired[0].at - step_at <= timedelta(minutes=45)
    absorbed = resolved[0].at - step_at
    recent = timedelta(minutes=DEFAULT.recent_window_min)
    documented = recent + timedelta(hours=DEFAULT.baseline_window_h) / 2
    assert documented <= absorbed <= documented + recent, absorbed


def test_replay_skips_quiet_stretches_without_changing_a_single_decision():
    series = _history(
        3, lambda t: 600 if T0.timestamp() + 36 * 3600 <= t < T0.timestamp() + 38 * 3600 else 1000
    )
    start, end = T0 + timedelta(days=1), T0 + timedelta(days=3)
    per_window = Condition(
        metric="output_tps", kind="regression", regression_pct=20, min_samples=3,
        test=MANN_WHITNEY, max_p_value=0.005,
    )  # fmt: skip
    for condition in (SPEED, per_window):
        fast = replay(series, condition, Timing(), DEFAULT_WINDOWS, start, end)
        assert _every_minute(series, condition, start, end) == fast.changes
        assert fast.evaluations == 2 * 24 * 60
        assert [c.state for c in fast.changes] == ["firing", "resolved"]


def _every_minute(series: Series, condition: Condition, start: datetime, end: datetime):
    """The replay without its skipping: one judged evaluation per minute."""
    from dashboard.alerts.replay import Replay

    result, state, since, notified = Replay(), State.OK, None, None
    now = start.timestamp()
    while now < end.timestamp():
        key = _spans(series, now, DEFAULT_WINDOWS)
        verdict = judge(
            condition,
            series.stats([key[0]]),
            series.stats(list(key[1:])),
            firing=state is State.FIRING,
        )
        at = datetime.fromtimestamp(now, UTC)
        action = step(state, verdict, at, Timing(), since=since, last_notified=notified)
        state, since, notified = _apply(action, state, since, notified, at, verdict, result)
        now += 60
    return result.changes


def test_scoring_counts_slowdowns_caught_and_fires_outside_them():
    slow_from, slow_to = T0 + timedelta(hours=30), T0 + timedelta(hours=32)
    series = _history(
        2.5, lambda t: 650 if slow_from.timestamp() <= t < slow_to.timestamp() else 1000
    )
    result = replay(
        series, SPEED, Timing(), DEFAULT_WINDOWS, T0 + timedelta(days=1), T0 + timedelta(days=2.5)
    )
    scored = score([(result, [Injected(slow_from, slow_to, 0.35)])], timedelta(minutes=30))
    assert scored["recall"] == 1.0 and scored["false_alarms"] == 0
    assert 0 < scored["median_minutes_to_detection"] <= 45


@pytest.mark.parametrize("pct", [10, 20, 50])
def test_the_percentage_is_a_log_ratio_in_the_worse_direction(pct):
    assert sequential.shift(pct, higher_is_worse=True) == pytest.approx(math.log(1 + pct / 100))
    assert sequential.shift(pct, higher_is_worse=False) == pytest.approx(-math.log(1 - pct / 100))
