"""Replaying a rule over a series' history, as the evaluator would have run it: plain
Python, no database. `backtest_alerts` feeds it stored runs; the alert benchmark feeds it a
generated year. Both go through `decide.judge` and `decide.step`, so what they measure is
what production does.

Windows are re-read at every evaluation (the evaluator's cadence, one minute by default),
but the verdict is only recomputed when a window boundary crossed a run — between runs
the windows hold the same samples and the verdict cannot change.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from dashboard.alerts.decide import (
    NO_DATA,
    Action,
    Condition,
    State,
    Stats,
    Timing,
    Verdict,
    judge,
    step,
)

SEASON_DAYS = 7


@dataclass(frozen=True)
class Windows:
    recent: timedelta
    baseline: timedelta
    same_hours: bool = False  # the seasonal baseline: same time of day, previous 7 days


@dataclass(frozen=True)
class Change:
    """One state change of one series, as backtest_alerts prints it."""

    state: str  # pending | firing | resolved
    at: datetime
    value: float | None
    baseline: float | None
    p_value: float | None

    def as_dict(self) -> dict:
        return {
            "state": self.state,
            "at": self.at.isoformat(),
            "value": self.value,
            "baseline": self.baseline,
            "p_value": self.p_value,
        }


@dataclass
class Replay:
    changes: list[Change] = field(default_factory=list)
    evaluations: int = 0


class Series:
    """One series' usable samples, sorted by time (epoch seconds)."""

    def __init__(self, times: Sequence[float], values: Sequence[float]) -> None:
        order = sorted(range(len(times)), key=times.__getitem__)
        self.times = [times[i] for i in order]
        self.values = [values[i] for i in order]

    def span(self, start: float, end: float) -> tuple[int, int]:
        return bisect.bisect_left(self.times, start), bisect.bisect_left(self.times, end)

    def stats(self, spans: list[tuple[int, int]]) -> Stats:
        values = [v for lo, hi in spans for v in self.values[lo:hi]]
        return Stats.of(values) if values else NO_DATA


def _spans(series: Series, now: float, windows: Windows) -> tuple[tuple[int, int], ...]:
    recent_s = windows.recent.total_seconds()
    recent = series.span(now - recent_s, now)
    if windows.same_hours:
        width = max(recent_s, 3600.0)
        baseline = tuple(
            series.span(now - day * 86400 - width, now - day * 86400 + width)
            for day in range(1, SEASON_DAYS + 1)
        )
    else:
        baseline = (series.span(now - recent_s - windows.baseline.total_seconds(), now - recent_s),)
    return (recent, *baseline)


def _next_change(series: Series, now: float, windows: Windows) -> float:
    """When a window boundary next crosses a run: the windows hold other samples at
    the first evaluation strictly after it (inf: never again)."""
    recent_s = windows.recent.total_seconds()
    if windows.same_hours:
        width = max(recent_s, 3600.0)
        offsets = [0.0, recent_s] + [
            o
            for day in range(1, SEASON_DAYS + 1)
            for o in (day * 86400 + width, day * 86400 - width)
        ]
    else:
        offsets = [0.0, recent_s, recent_s + windows.baseline.total_seconds()]
    times, best = series.times, float("inf")
    for offset in offsets:
        # A boundary at now - offset includes runs at or after it: the run at index i
        # leaves (or enters) once now - offset passes times[i].
        i = bisect.bisect_left(times, now - offset)
        if i < len(times):
            best = min(best, times[i] + offset)
    return best


def replay(
    series: Series,
    condition: Condition,
    timing: Timing,
    windows: Windows,
    start: datetime,
    end: datetime,
    cadence: timedelta = timedelta(minutes=1),
) -> Replay:
    """Every evaluation from `start` to `end`, every `cadence`; the state changes.

    While a series is ok and its verdict says nothing happens, the evaluations until a
    window boundary next crosses a run are counted without being run one by one: they
    would decide the same thing (the verdict depends only on the windows' samples)."""
    result = Replay()
    state, since, notified = State.OK, None, None
    last_key, last_firing, verdict = None, False, None
    origin, step_s = start.timestamp(), cadence.total_seconds()
    total = max(0, math.ceil((end.timestamp() - origin) / step_s))  # evaluations in all
    regression = condition.kind == "regression"
    k = 0
    while k < total:
        now = origin + k * step_s
        key = _spans(series, now, windows)
        firing = state is State.FIRING
        # Hysteresis depends on the state too: recompute when either changed.
        if key != last_key or firing != last_firing:
            recent = series.stats([key[0]])
            baseline = series.stats(list(key[1:])) if regression else None
            verdict = judge(condition, recent, baseline, firing=firing)
            last_key, last_firing = key, firing
        at = datetime.fromtimestamp(now, UTC)
        action = step(state, verdict, at, timing, since=since, last_notified=notified)
        state, since, notified = _apply(action, state, since, notified, at, verdict, result)
        if state is State.OK and action is Action.NOTHING:
            # The next evaluation whose windows hold other samples: strictly after it.
            change = _next_change(series, now, windows)
            k = total if change == math.inf else min(total, k + int((change - now) // step_s) + 1)
        else:
            k += 1
    result.evaluations = total
    return result


def _apply(
    action: Action,
    state: State,
    since: datetime | None,
    notified: datetime | None,
    at: datetime,
    verdict: Verdict,
    result: Replay,
):
    def change(name: str) -> None:
        baseline = verdict.baseline.value if verdict.baseline else None
        result.changes.append(Change(name, at, verdict.recent.value, baseline, verdict.p_value))

    if action is Action.PEND:
        change("pending")
        return State.PENDING, at, None
    if action is Action.FIRE:
        change("firing")
        return State.FIRING, since or at, at
    if action is Action.REMIND:
        return state, since, at
    if action in (Action.RESOLVE, Action.CANCEL):
        if action is Action.RESOLVE:
            change("resolved")
        return State.OK, None, None
    return state, since, notified


# -- scoring against known injected changes -------------------------------------------------


@dataclass(frozen=True)
class Injected:
    """A slowdown put into the history on purpose: [start, end), and how much worse."""

    start: datetime
    end: datetime
    factor: float


def score(replays: list[tuple[Replay, list[Injected]]], grace: timedelta) -> dict:
    """Score many series together: recall and false alarms pooled, median over all delays."""
    delays, injected, caught, false, evaluations = [], 0, 0, 0, 0
    for result, series_injected in replays:
        fires = [c.at for c in result.changes if c.state == "firing"]
        for change in series_injected:
            injected += 1
            hit = next((at for at in fires if change.start <= at < change.end + grace), None)
            if hit is not None:
                caught += 1
                delays.append((hit - change.start).total_seconds() / 60)
        false += sum(
            1 for at in fires if not any(c.start <= at < c.end + grace for c in series_injected)
        )
        evaluations += result.evaluations
    delays.sort()
    return {
        "injected": injected,
        "caught": caught,
        "recall": round(caught / injected, 4) if injected else None,
        "median_minutes_to_detection": delays[len(delays) // 2] if delays else None,
        "false_alarms": false,
        "evaluations": evaluations,
        "false_alarms_per_1000_evaluations": round(1000 * false / evaluations, 4)
        if evaluations
        else None,
    }
