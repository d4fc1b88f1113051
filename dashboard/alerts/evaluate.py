"""Deciding alert state from measured values: plain Python, no database, no I/O.

The caller measures two windows (recent, and for regressions a baseline that ends where
the recent window starts), hands them to `judge()`, and asks `decide()` what to do with
the rule's open event, if any.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from probes.engine.contract import ROLLUP_METRICS, RUN_FIELDS

# The aggregated metrics, each worse in the direction the contract says is not better
# (latencies as they grow, speed as it shrinks), and availability as it shrinks.
HIGHER_IS_WORSE = frozenset(m for m in ROLLUP_METRICS if RUN_FIELDS[m].better == "lower")
LOWER_IS_WORSE = frozenset(
    {*(m for m in ROLLUP_METRICS if RUN_FIELDS[m].better == "higher"), "success_rate"}
)
METRICS = HIGHER_IS_WORSE | LOWER_IS_WORSE

REGRESSION = "regression"
THRESHOLD = "threshold"

# Hysteresis: a firing alert clears only once the value is this share of the limit back
# inside it, so a median hovering at the limit does not flap between firing and resolved.
RESOLVE_MARGIN = 0.05


@dataclass(frozen=True)
class Stats:
    """One window of one series: how many usable samples, and the headline value
    (the median for latencies and speed, ok/all for success_rate)."""

    samples: int
    value: float | None


@dataclass(frozen=True)
class Condition:
    metric: str
    kind: str  # REGRESSION or THRESHOLD
    min_samples: int = 1
    regression_pct: float | None = None
    threshold: float | None = None

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}")
        if self.kind == REGRESSION and (self.regression_pct is None or self.regression_pct <= 0):
            raise ValueError("a regression condition needs a positive percentage")
        if self.kind == THRESHOLD and self.threshold is None:
            raise ValueError("a threshold condition needs a threshold")
        if self.kind not in (REGRESSION, THRESHOLD):
            raise ValueError(f"unknown condition kind {self.kind!r}")

    @property
    def higher_is_worse(self) -> bool:
        return self.metric in HIGHER_IS_WORSE

    def limit(self, baseline: Stats | None) -> float | None:
        """The value past which the recent median counts as bad, or None if unknown."""
        if self.kind == THRESHOLD:
            return self.threshold
        if baseline is None or baseline.value is None:
            return None
        factor = self.regression_pct / 100
        if self.higher_is_worse:
            return baseline.value * (1 + factor)
        return baseline.value * max(0.0, 1 - factor)

    def is_worse(self, value: float, limit: float) -> bool:
        return value > limit if self.higher_is_worse else value < limit

    def clear_limit(self, limit: float) -> float:
        """The value a firing alert must get back past to resolve (see RESOLVE_MARGIN)."""
        return limit * (1 - RESOLVE_MARGIN if self.higher_is_worse else 1 + RESOLVE_MARGIN)


class Health(Enum):
    BREACHED = "breached"
    HEALTHY = "healthy"
    UNKNOWN = "unknown"  # too few samples: say nothing rather than guess


@dataclass(frozen=True)
class Verdict:
    health: Health
    recent: Stats
    baseline: Stats | None
    limit: float | None
    reason: str


def judge(
    condition: Condition, recent: Stats, baseline: Stats | None = None, *, firing: bool = False
) -> Verdict:
    """Compare the recent window with the condition (and the baseline for regressions).

    `firing`: the series has an open alert, which stays open until the value is clearly
    back (RESOLVE_MARGIN inside the limit).
    """

    def verdict(health: Health, limit: float | None, reason: str) -> Verdict:
        return Verdict(health, recent, baseline, limit, reason)

    if recent.samples < condition.min_samples or recent.value is None:
        return verdict(
            Health.UNKNOWN,
            None,
            f"{recent.samples} recent samples, {condition.min_samples} needed",
        )
    if condition.kind == REGRESSION and (
        baseline is None or baseline.samples < condition.min_samples or baseline.value is None
    ):
        have = baseline.samples if baseline else 0
        return verdict(
            Health.UNKNOWN, None, f"{have} baseline samples, {condition.min_samples} needed"
        )
    limit = condition.limit(baseline)
    if condition.is_worse(recent.value, limit):
        return verdict(Health.BREACHED, limit, f"{recent.value:.4g} is past {limit:.4g}")
    if firing and condition.is_worse(recent.value, condition.clear_limit(limit)):
        return verdict(
            Health.BREACHED,
            limit,
            f"{recent.value:.4g} is within {limit:.4g} but not yet clear of it",
        )
    return verdict(Health.HEALTHY, limit, f"{recent.value:.4g} is within {limit:.4g}")


class Action(Enum):
    FIRE = "fire"  # open a new event and notify
    RESOLVE = "resolve"  # close the open event and notify
    REFRESH = "refresh"  # still firing: update the open event's latest values, no notice
    NOTHING = "nothing"


def decide(is_open: bool, verdict: Verdict) -> Action:
    """What a verdict means for a series that does (or does not) have an open event.

    Unknown keeps the current state either way: a quiet hour with too few runs must
    neither raise nor clear an alert.
    """
    if verdict.health is Health.UNKNOWN:
        return Action.NOTHING
    if verdict.health is Health.BREACHED:
        return Action.REFRESH if is_open else Action.FIRE
    return Action.RESOLVE if is_open else Action.NOTHING
