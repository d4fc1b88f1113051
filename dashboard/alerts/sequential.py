"""The default regression test: a CUSUM on clipped log-ratios. Plain Python, no database.

Why not a fresh two-sample test every minute (decide.Condition.p_value, the previous
default): on histories shaped like provider data (lognormal jitter, a daily cycle, rare
runs at a fraction or a multiple of the usual speed) two unlucky runs in a three-run
window are a median, and a fresh test every minute gets many tries at that luck. A
sequential test accumulates evidence run by run instead (Page's CUSUM, the one-sided
form of Wald's SPRT with a reset at zero), so it can be both quieter and fast:

- each run's evidence is its log-ratio to the baseline's median, in the worse direction;
- clipped at CLIP × the rule's percentage (or CLIP_NOISE × the baseline's noise, when
  that is more), so a single run at a third of the usual speed counts as one clearly
  bad run, not as a verdict;
- less an allowance (ALLOWANCE × the rule's percentage): a shift smaller than that
  drains the sum instead of filling it, so a lasting −10 % move under a 20 % rule never
  builds up evidence (it is below what the rule pages on);
- in units of the baseline's own noise (its interquartile range: robust to the
  baseline's outliers), so the limit means the same on a steady provider and on a jittery one.

The sum is rebuilt from the runs of the recent window (oldest first) at each evaluation,
so nothing is kept between evaluations and the backtest replays it exactly. It fires
when the sum reaches THRESHOLD and at least MIN_BAD_RUNS runs of its current climb are
past the rule's limit: never on one or two outliers. A firing alert stays until the sum
has drained to zero (the runs are back below the allowance); the sum is capped at
CAP × THRESHOLD so a long slowdown does not take hours to drain.

Measured on the generated field histories in tests/benchmarks/bench_alerts_detection.py.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

THRESHOLD = 6.0  # in baseline-noise units (h of the CUSUM)
ALLOWANCE = 0.85  # k as a share of the rule's percentage (in log-ratio)
CLIP = 2.0  # one run counts at most this many times the rule's percentage …
CLIP_NOISE = 3.0  # … or this many times the baseline's noise, if more (small percentages)
CAP = 2.0  # the sum never exceeds CAP × THRESHOLD
MIN_BAD_RUNS = 3  # runs past the limit needed in the climb that fires
# A baseline quieter than this (log units, ~2 %) is taken as this noisy: a provider that
# answered identically for a day must not page on a 21 % blip.
MIN_NOISE = 0.02
# Interquartile range to standard deviation for normal data.
_IQR_SCALE = 1.349


@dataclass(frozen=True)
class Evidence:
    score: float  # the CUSUM at the latest run, in noise units
    bad_runs: int  # runs past the limit since the sum last left zero
    noise: float  # the baseline's robust spread (log units)
    # Where the current climb began: the index in `recent` of its first run (None while
    # the sum is at zero). The runs from there on are the changed level a notice states.
    start: int | None = None

    def fires(self) -> bool:
        return self.score >= THRESHOLD and self.bad_runs >= MIN_BAD_RUNS


def shift(pct: float, higher_is_worse: bool) -> float:
    """The rule's percentage as a log-ratio in the worse direction: 20 % slower output
    (× 0.8) is log(1 / 0.8); 20 % longer latency is log(1.2)."""
    factor = pct / 100
    if higher_is_worse:
        return math.log1p(factor)
    return -math.log(max(1e-9, 1 - factor))


def baseline_center(baseline: Sequence[float]) -> tuple[float, float] | None:
    """The baseline's median and robust spread (its interquartile range, scaled to a
    standard deviation), in logs; None when it has no usable value. One sort of the raw
    values: the log is monotonic, so the quantiles of the logs are the logs of the
    quantiles (the backtest replays this at every run of a year, so it must be cheap)."""
    ordered = sorted(baseline)
    skip = bisect.bisect_right(ordered, 0.0)  # no log-ratio for zero or less
    n = len(ordered) - skip
    if not n:
        return None
    center = math.log(ordered[skip + n // 2])
    spread = math.log(ordered[skip + (3 * n) // 4]) - math.log(ordered[skip + n // 4])
    return center, max(MIN_NOISE, spread / _IQR_SCALE)


def evidence(
    recent: Sequence[float], baseline: Sequence[float], pct: float, higher_is_worse: bool
) -> Evidence:
    """The CUSUM over `recent` (oldest first) against `baseline`."""
    center = baseline_center(baseline)
    if center is None:
        return Evidence(0.0, 0, MIN_NOISE)
    middle, noise = center
    limit = shift(pct, higher_is_worse)
    allowance, cap = ALLOWANCE * limit, CAP * THRESHOLD
    clip = max(CLIP * limit, CLIP_NOISE * noise)
    sign = 1.0 if higher_is_worse else -1.0
    score, bad, start = 0.0, 0, None
    for index, value in enumerate(recent):
        if value <= 0:
            continue
        ratio = sign * (math.log(value) - middle)
        step = (min(max(ratio, -clip), clip) - allowance) / noise
        score = min(cap, max(0.0, score + step))
        if score == 0.0:
            bad, start = 0, None
        else:
            start = index if start is None else start
            bad += ratio >= limit
    return Evidence(score, bad, noise, start)
