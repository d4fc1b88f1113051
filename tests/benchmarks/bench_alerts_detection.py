"""How well alert rules catch real slowdowns and stay quiet on noise: a generated year.

    make bench-alerts-detection   (~12 min; no database needed)

Each series is a year of runs, one every 15 minutes, output speed with ±15 % jitter
(uniform), into which slowdowns of 20–50 % lasting 2–8 hours are injected at random
(about one a week per series; their times are known). Every rule is replayed over the
year at the evaluator's cadence (one minute) by the same code backtest_alerts uses
(dashboard/alerts/replay.py → decide.judge/step), and scored: recall of injected
slowdowns, minutes from the slowdown's start to firing, and false alarms (fires outside any
slowdown) per 1,000 evaluations. Targets (issue 10): recall ≥ 95 %, median detection
≤ 45 min, ≤ 1 false alarm per 1,000 evaluations.

Printed side by side: the significance-tested rule (the shipped recommendation), and the
old median-threshold rule — once with its defaults, once tuned to the same windows.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dashboard.alerts.decide import Condition, Timing  # noqa: E402
from dashboard.alerts.replay import Injected, Series, Windows, replay, score  # noqa: E402

SERIES = 8
DAYS = 365
EVERY = timedelta(minutes=15)
JITTER = 0.15
START = datetime(2025, 1, 1, tzinfo=UTC)
# A fire up to one recent window after a slowdown ended still counts as catching it.
GRACE = timedelta(hours=1)


def generate(seed: int) -> tuple[Series, list[Injected]]:
    rnd = random.Random(seed)
    base = rnd.uniform(300, 2500)
    end = START + timedelta(days=DAYS)
    injected, at = [], START + timedelta(days=2)  # a baseline's worth before the first
    while True:
        at += timedelta(hours=rnd.uniform(72, 264))
        length = timedelta(hours=rnd.uniform(2, 8))
        if at + length >= end:
            break
        injected.append(Injected(at, at + length, rnd.uniform(0.2, 0.5)))
        at += length
    times, values = [], []
    moment, k = START + timedelta(seconds=rnd.uniform(0, 900)), 0
    while moment < end:
        slow = next((c.factor for c in injected if c.start <= moment < c.end), 0.0)
        jitter = rnd.uniform(1 - JITTER, 1 + JITTER)
        times.append(moment.timestamp())
        values.append(base * (1 - slow) * jitter)  # output tok/s: a slowdown lowers it
        k += 1
        moment = START + k * EVERY + timedelta(seconds=rnd.uniform(0, 5))
    return Series(times, values), injected


RULES = {
    "significance-tested (recommended)": (
        Condition(
            metric="output_tps",
            kind="regression",
            regression_pct=10,
            min_samples=3,
            min_baseline_samples=40,
            max_p_value=0.005,
        ),
        Timing(),
        Windows(recent=timedelta(minutes=45), baseline=timedelta(hours=24)),
    ),
    "old median-threshold, defaults (30 min, 50 %, 5 runs)": (
        Condition(
            metric="output_tps",
            kind="regression",
            regression_pct=50,
            min_samples=5,
            max_p_value=1.0,
        ),  # fmt: skip
        Timing(),
        Windows(recent=timedelta(minutes=30), baseline=timedelta(hours=24)),
    ),
    "old median-threshold, same windows (45 min, 10 %, 3 runs)": (
        Condition(
            metric="output_tps",
            kind="regression",
            regression_pct=10,
            min_samples=3,
            max_p_value=1.0,
        ),  # fmt: skip
        Timing(),
        Windows(recent=timedelta(minutes=45), baseline=timedelta(hours=24)),
    ),
}


def _minutes(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f}"


def main() -> None:
    generated = [generate(seed) for seed in range(SERIES)]
    end = START + timedelta(days=DAYS)
    report = {}
    for name, (condition, timing, windows) in RULES.items():
        began = time.perf_counter()
        replays = [
            (replay(series, condition, timing, windows, START + timedelta(days=1), end), injected)
            for series, injected in generated
        ]
        result = score(replays, GRACE)
        result["seconds"] = round(time.perf_counter() - began, 1)
        report[name] = result
        print(json.dumps({"rule": name, **result}), flush=True)
    best = report["significance-tested (recommended)"]
    ok = (
        best["recall"] >= 0.95
        and best["median_minutes_to_detection"] <= 45
        and best["false_alarms_per_1000_evaluations"] <= 1
    )
    print(
        f"\n{SERIES} series × {DAYS} days, a run every 15 min, ±{JITTER:.0%} jitter:\n"
        + "\n".join(
            f"  {name:60} recall {r['recall']:.1%}  median detection "
            f"{_minutes(r['median_minutes_to_detection'])} min  "
            f"false alarms/1000 eval {r['false_alarms_per_1000_evaluations']:.3f}"
            for name, r in report.items()
        )
        + f"\nTargets met: {'yes' if ok else 'NO'}"
    )


if __name__ == "__main__":
    main()
