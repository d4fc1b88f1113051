"""The default alert rule, in one place: the admin's field defaults (a rule made with
nothing changed), `backtest_alerts`' options and the help text on /alerts/ all read it, so
what the backtest and the benchmark measure is what a new rule does.

Chosen on tests/benchmarks/bench_alerts_detection.py (the measurements are in the README,
"Alerts"): a CUSUM over the last hour's runs against the 24 hours before it, fired at 20 %.
"""

from __future__ import annotations

from dataclasses import dataclass

CUSUM = "cusum"
MANN_WHITNEY = "mann_whitney"
TEST_CHOICES = [
    (CUSUM, "Sequential: CUSUM on clipped log-ratios (evidence builds up run by run)"),
    (MANN_WHITNEY, "Per window: one-sided Mann–Whitney U of the recent runs (p-value)"),
]

PRECEDING = "preceding"
SAME_HOURS = "same_hours"


@dataclass(frozen=True)
class RuleDefaults:
    test: str = CUSUM
    regression_pct: float = 20.0
    recent_window_min: int = 60
    baseline_window_h: int = 6
    baseline_mode: str = PRECEDING
    min_samples: int = 3
    min_baseline_samples: int = 40
    max_p_value: float = 0.005  # the Mann–Whitney test's limit (not used by the CUSUM)
    pending_for_min: int = 0
    resolve_margin_pct: float = 5.0


DEFAULT = RuleDefaults()


def describe(rule: RuleDefaults = DEFAULT) -> str:
    """The default rule in words, for the help on /alerts/ (generated, so it cannot drift
    from what a new rule does)."""
    baseline = (
        "the same hours of the previous 7 days"
        if rule.baseline_mode == SAME_HOURS
        else f"the {rule.baseline_window_h} hours before"
    )
    how = (
        "a sequential test (a CUSUM on clipped log-ratios, in units of the baseline's own "
        "noise) that needs at least three runs past the limit, so single bad runs never page"
        if rule.test == CUSUM
        else f"a one-sided Mann–Whitney U test at p ≤ {rule.max_p_value:g}"
    )
    return (
        f"A new regression rule, with nothing changed, compares the runs of the last "
        f"{rule.recent_window_min} minutes (at least {rule.min_samples}) with {baseline} "
        f"(at least {rule.min_baseline_samples} runs) and fires when they are worse by more "
        f"than {rule.regression_pct:g} %, decided by {how}. It resolves once the evidence "
        f"has drained; a lasting change becomes the new baseline after "
        f"{rule.recent_window_min} minutes and half the baseline's hours."
    )
