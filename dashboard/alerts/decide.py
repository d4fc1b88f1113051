"""Deciding alert state from measured samples: plain Python (and scipy), no database.

The caller measures two windows of one series (recent, and for regressions a baseline),
hands them to `judge()` for a verdict, then asks `step()` what the verdict means for the
series' current state (ok, pending or firing). The evaluator (database side) and the
backtest (replaying stored history) both decide through here, so what the backtest
measures is what production does.

Why a test at all: provider jitter is ±5–15 % (lognormal: long tails), so a median of a
few runs past a fixed percentage is often just noise. A regression fires only when the
change is both large enough (the rule's percentage) *and* backed by evidence: by default
a sequential test that accumulates it run by run (`sequential.py`, CUSUM), or, as an
alternative, a one-sided Mann–Whitney U of the recent samples against the baseline's
(p at most the rule's `max_p_value`), fresh at each evaluation.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from functools import partial

from dashboard import histogram
from dashboard.alerts import sequential
from dashboard.alerts.defaults import CUSUM, DEFAULT, MANN_WHITNEY
from probes.engine.contract import ROLLUP_METRICS, RUN_FIELDS

# Latencies, error rates and staleness get worse as they grow; speed and availability as
# they shrink.
# The aggregated metrics, each worse in the direction the contract says is not better
# (latencies as they grow, speed as it shrinks), plus the availability and freshness ones.
HIGHER_IS_WORSE = frozenset(
    {
        *(m for m in ROLLUP_METRICS if RUN_FIELDS[m].better == "lower"),
        "error_rate",
        "minutes_since_ok",
    }
)
LOWER_IS_WORSE = frozenset(
    {*(m for m in ROLLUP_METRICS if RUN_FIELDS[m].better == "higher"), "success_rate"}
)
METRICS = HIGHER_IS_WORSE | LOWER_IS_WORSE
# Ratios of runs rather than per-run measurements: their value is a share, not a median.
RATE_METRICS = frozenset({"error_rate", "success_rate"})

REGRESSION = "regression"
THRESHOLD = "threshold"

DEFAULT_MAX_P_VALUE = DEFAULT.max_p_value
# Hysteresis: a firing alert clears only once the value is this share of the limit back
# inside it, so a median hovering at the limit does not flap between firing and resolved.
DEFAULT_RESOLVE_MARGIN = DEFAULT.resolve_margin_pct / 100
# A histogram bucket stands for this many samples at most when a long baseline is expanded
# for the test: the test's cost stays bounded and its p-value barely moves.
_MAX_BASELINE_SAMPLES = 2000


@dataclass(frozen=True)
class Stats:
    """One window of one series: how many usable samples, the headline value (median for
    per-run metrics, the share for rates, the age for staleness) and the samples
    themselves, which the significance test needs."""

    samples: int
    value: float | None
    values: tuple[float, ...] = field(default=(), repr=False)
    # When each of `values` was measured (raw runs only, oldest first): says since when a
    # changed level holds.
    times: tuple[datetime, ...] = field(default=(), repr=False)

    @classmethod
    def of(cls, values: Iterable[float], times: Iterable[datetime] = ()) -> Stats:
        values = tuple(values)
        return cls(len(values), statistics.median(values) if values else None, values, tuple(times))

    def since(self, index: int) -> Stats:
        """The samples from `index` on (the runs of a change that began there)."""
        return Stats.of(self.values[index:], self.times[index:])

    @property
    def first_at(self) -> datetime | None:
        return self.times[0] if self.times else None

    @classmethod
    def of_rate(cls, flags: Iterable[bool]) -> Stats:
        """A share of runs (0/1 samples), e.g. error rate."""
        values = tuple(1.0 if flag else 0.0 for flag in flags)
        return cls(len(values), sum(values) / len(values) if values else None, values)

    @classmethod
    def of_histogram(cls, hist: Mapping[str, int]) -> Stats:
        """A window read from rollup histograms: the samples are the buckets' values
        (within ±1.2 % of the raw ones), thinned proportionally beyond a few thousand."""
        total = histogram.count(hist)
        scale = min(1.0, _MAX_BASELINE_SAMPLES / total) if total else 1.0
        values = []
        for key, n in sorted(hist.items(), key=lambda kv: int(kv[0])):
            values += [histogram.bucket_value(int(key))] * max(1, round(n * scale))
        return cls(total, histogram.percentile(hist, 50), tuple(values))


NO_DATA = Stats(0, None)


@dataclass(frozen=True)
class Condition:
    metric: str
    kind: str  # REGRESSION or THRESHOLD
    min_samples: int = 1
    min_baseline_samples: int | None = None  # default: min_samples
    regression_pct: float | None = None
    threshold: float | None = None
    max_p_value: float = DEFAULT_MAX_P_VALUE
    resolve_margin: float = DEFAULT_RESOLVE_MARGIN
    test: str = DEFAULT.test  # how a regression is decided: CUSUM or MANN_WHITNEY

    def __post_init__(self) -> None:
        if self.test not in (CUSUM, MANN_WHITNEY):
            raise ValueError(f"unknown test {self.test!r}")
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}")
        if self.kind not in (REGRESSION, THRESHOLD):
            raise ValueError(f"unknown condition kind {self.kind!r}")
        if self.kind == REGRESSION and (self.regression_pct is None or self.regression_pct <= 0):
            raise ValueError("a regression condition needs a positive percentage")
        if self.kind == THRESHOLD and self.threshold is None:
            raise ValueError("a threshold condition needs a threshold")
        if not 0 < self.max_p_value <= 1:
            raise ValueError("max_p_value must be in (0, 1]")
        if not 0 <= self.resolve_margin < 1:
            raise ValueError("resolve_margin must be in [0, 1)")

    @property
    def higher_is_worse(self) -> bool:
        return self.metric in HIGHER_IS_WORSE

    @property
    def baseline_minimum(self) -> int:
        return self.min_baseline_samples or self.min_samples

    def limit(self, baseline: Stats | None) -> float | None:
        """The value past which the recent value counts as bad, or None if unknown."""
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
        """The value a firing alert must get back past to resolve."""
        margin = self.resolve_margin
        return limit * (1 - margin if self.higher_is_worse else 1 + margin)

    def effect(self, recent: Stats, baseline: Stats | None) -> float | None:
        """How much worse the recent value is than the baseline, as a fraction (0.25 is
        25 % worse); negative when better."""
        if baseline is None or not baseline.value or recent.value is None:
            return None
        change = recent.value / baseline.value - 1
        return change if self.higher_is_worse else -change

    def p_value(self, recent: Stats, baseline: Stats) -> float:
        """One-sided Mann–Whitney U: the chance of recent samples at least this much
        worse than the baseline's if nothing had changed."""
        # scipy where it is used: the alert models import this module when Django starts.
        from scipy.stats import mannwhitneyu

        result = mannwhitneyu(
            recent.values,
            baseline.values,
            alternative="greater" if self.higher_is_worse else "less",
        )
        p = float(result.pvalue)
        return 1.0 if p != p else p  # all samples equal on both sides: NaN, no evidence


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
    p_value: float | None = None
    effect: float | None = None
    # The level the series is at now, when it is not the whole recent window's median: a
    # CUSUM decides on the runs since the change began, and in a ten-run window the
    # median of seven good runs and three slow ones is still the old level (the "204 ms
    # past 300 ms" of a 3× slowdown). Every notice states `current`.
    level: Stats | None = None

    @property
    def current(self) -> Stats:
        return self.level if self.level is not None else self.recent


def judge(
    condition: Condition, recent: Stats, baseline: Stats | None = None, *, firing: bool = False
) -> Verdict:
    """Compare the recent window with the condition (and the baseline for regressions).

    `firing`: the series has a firing alert, which stays open until the value is clearly
    back (the resolve margin inside the limit) — no test needed to stay bad.
    """
    limit = condition.limit(baseline) if recent.value is not None else None
    effect = condition.effect(recent, baseline)

    def verdict(
        health: Health, reason: str, p_value: float | None = None, *, level=None, effect=effect
    ) -> Verdict:
        return Verdict(health, recent, baseline, limit, reason, p_value, effect, level)

    if recent.samples < condition.min_samples or recent.value is None:
        return verdict(
            Health.UNKNOWN, f"{recent.samples} recent samples, {condition.min_samples} needed"
        )
    if condition.kind == REGRESSION:
        have = baseline.samples if baseline else 0
        if baseline is None or have < condition.baseline_minimum or baseline.value is None:
            return verdict(
                Health.UNKNOWN, f"{have} baseline samples, {condition.baseline_minimum} needed"
            )
        if not recent.values or not baseline.values:
            return verdict(Health.UNKNOWN, "no samples to test")
        # Log-ratios need positive values: shares of runs (0/1) and a baseline of zeros
        # (a queue time that was always 0 ms) are decided per window instead.
        if condition.test == CUSUM and condition.metric not in RATE_METRICS and baseline.value > 0:
            return _judge_cusum(condition, recent, baseline, firing, verdict)
    if condition.is_worse(recent.value, limit):
        if condition.kind == THRESHOLD:
            return verdict(Health.BREACHED, f"{recent.value:.4g} is past {limit:.4g}")
        p = condition.p_value(recent, baseline)
        if p <= condition.max_p_value:
            return verdict(
                Health.BREACHED, f"{recent.value:.4g} is past {limit:.4g} (p={p:.2g})", p
            )
        if not firing:
            return verdict(
                Health.HEALTHY,
                f"{recent.value:.4g} is past {limit:.4g} but could be chance (p={p:.2g})",
                p,
            )
        return verdict(Health.BREACHED, f"{recent.value:.4g} is still past {limit:.4g}", p)
    if firing and condition.is_worse(recent.value, condition.clear_limit(limit)):
        return verdict(
            Health.BREACHED, f"{recent.value:.4g} is within {limit:.4g} but not yet clear of it"
        )
    return verdict(Health.HEALTHY, f"{recent.value:.4g} is within {limit:.4g}")


def _judge_cusum(condition: Condition, recent: Stats, baseline: Stats, firing: bool, verdict):
    found = sequential.evidence(
        recent.values, baseline.values, condition.regression_pct, condition.higher_is_worse
    )
    runs = f"CUSUM {found.score:.1f}/{sequential.THRESHOLD:g}, {found.bad_runs} runs past the limit"
    if found.start is not None:
        level = recent.since(found.start)
        verdict = partial(verdict, level=level, effect=condition.effect(level, baseline))
    if found.fires():
        return verdict(Health.BREACHED, f"{recent.value:.4g}: {runs}")
    if firing and found.score > 0:
        return verdict(Health.BREACHED, f"{recent.value:.4g}: not yet clear ({runs})")
    return verdict(Health.HEALTHY, f"{recent.value:.4g}: {runs}")


# -- states ---------------------------------------------------------------------------------


class State(Enum):
    OK = "ok"
    PENDING = "pending"  # breached, waiting out the rule's `for` before it fires
    FIRING = "firing"


class Action(Enum):
    PEND = "pend"  # open a pending event, no notice yet
    FIRE = "fire"  # fire (a new event, or the pending one) and notify
    REFRESH = "refresh"  # unchanged: update the open event's latest values
    REMIND = "remind"  # still firing after the repeat interval: notify again
    RESOLVE = "resolve"  # close the firing event and notify
    CANCEL = "cancel"  # a pending event that cleared before firing: dropped, no notice
    NOTHING = "nothing"


@dataclass(frozen=True)
class Timing:
    """Prometheus' `for` and Alertmanager's repeat interval, per rule."""

    pending_for: timedelta = timedelta(0)
    repeat_every: timedelta | None = None


def step(
    state: State,
    verdict: Verdict,
    now: datetime,
    timing: Timing,
    *,
    since: datetime | None = None,
    last_notified: datetime | None = None,
) -> Action:
    """What a verdict means for a series in `state` (pending or firing `since`, last
    notified at `last_notified`).

    Unknown keeps the state either way: a quiet hour with too few runs must neither raise
    nor clear an alert, nor let a pending one ripen.
    """
    health = verdict.health
    if health is Health.UNKNOWN:
        return Action.NOTHING if state is State.OK else Action.REFRESH
    if health is Health.BREACHED:
        if state is State.OK:
            return Action.FIRE if not timing.pending_for else Action.PEND
        if state is State.PENDING:
            ripe = since is not None and now - since >= timing.pending_for
            return Action.FIRE if ripe else Action.REFRESH
        reminded = last_notified or since
        if timing.repeat_every and reminded and now - reminded >= timing.repeat_every:
            return Action.REMIND
        return Action.REFRESH
    if state is State.PENDING:
        return Action.CANCEL
    if state is State.FIRING:
        return Action.RESOLVE
    return Action.NOTHING
