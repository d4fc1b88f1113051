"""The capacity planner's plain core: where in its interval each probe starts (its
phase), and how much of a cap its probes need. No Django: the glue that reads probes and
their recent durations and writes next_run_at is probes/scheduling/capacity.py.

Probes sharing a cap (a provider's max_concurrency, a worker's probe slots, an endpoint
measured by one probe at a time) are given phases so that their expected busy time does
not overlap: a probe that finds its cap
full waits (probes/scheduling/waiting.py) and, past its lateness budget, is skipped, so
stacking seven probes on the same second of a one-slot server would skip most of them.

The schedule repeats every hour for the usual intervals (60, 300, 900, 3600 s all divide
it), so each cap's expected use is a one-hour profile, one cell per second. A new probe
takes the phase that adds the least use above its caps (the provider's counts most), then
the fewest starts in the same second, then the soonest. Jitter (a random delay the
dispatcher adds) widens each busy window, so it still applies on top without overlap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

# numpy is imported in the functions that use it: the admin and onboarding load this module
# when Django starts, and every manage.py command would pay for it (tests/test_layers.py).
if TYPE_CHECKING:
    import numpy as np

CYCLE_S = 3600
# Per second of use above the cap: above the provider's is what skips slots; above a
# worker's only delays them a little (a region can have several workers). A start in the
# same second as another's costs as much as ten seconds above a worker's cap: probes
# added together must not all start at once.
PROVIDER_WEIGHT = 1000.0
# Each endpoint is a cap of one: two of our probes of one endpoint at once load the same
# server, and each measures it slower than it is (the demo's GPU profile slows every
# stream by a tenth per other one), so a claim read 73 % where one alone met it. Below
# the provider's weight: an overlap bends a measurement, a skipped slot loses it.
ENDPOINT_WEIGHT = 500.0
WORKER_WEIGHT = 10.0
START_WEIGHT = 100.0
# Utilisation above this warns (the plan has no room for a slow hour), above 1 fails.
WARN_SHARE = 0.8
# Intervals the add-endpoint proposal offers when the chosen one does not fit.
NICE_INTERVALS_S = (60, 120, 300, 600, 900, 1800, 3600)


@dataclass(frozen=True)
class Load:
    """One probe as the planner sees it.

    busy_s: how long one slot holds its caps (its requests in turn);
    width: the provider slots it holds at once (a parallel group's N, else 1);
    phase_s: seconds into the hour (epoch mod CYCLE_S) of one of its starts; None for a
    probe not placed yet.
    """

    key: object
    interval_s: int
    busy_s: float
    width: int = 1
    jitter_s: int = 0
    phase_s: int | None = None

    @property
    def window_s(self) -> int:
        # A slot starts up to jitter_s late: its busy time may fall anywhere in this.
        return max(1, min(math.ceil(self.busy_s + self.jitter_s), self.interval_s))

    def starts(self, phase_s: int) -> np.ndarray:
        import numpy as np

        count = max(1, math.ceil(CYCLE_S / self.interval_s))
        return (phase_s + self.interval_s * np.arange(count)) % CYCLE_S

    def busy_per_hour_s(self, units: int) -> float:
        """Cap-seconds per hour this probe needs: each slot holds `units` for busy_s."""
        return units * self.busy_s * 3600.0 / self.interval_s


@dataclass
class Profile:
    """Expected use of one cap over the hour: `limit` units at once."""

    limit: int
    weight: float
    use: np.ndarray
    starts: np.ndarray

    @classmethod
    def empty(cls, limit: int, weight: float) -> Profile:
        import numpy as np

        return cls(max(1, limit), weight, np.zeros(CYCLE_S), np.zeros(CYCLE_S))

    def add(self, load: Load, phase_s: int, units: int) -> None:
        import numpy as np

        for start in load.starts(phase_s):
            cells = (start + np.arange(load.window_s)) % CYCLE_S
            self.use[cells] += units
            self.starts[start] += 1

    def cost(self, load: Load, units: int) -> np.ndarray:
        """Per candidate phase (0 … interval-1): the weighted use above the limit that
        placing `load` there would add, plus its starts sharing a second with others'."""
        import numpy as np

        excess = np.minimum(np.maximum(self.use + units - self.limit, 0.0), units)
        doubled = np.concatenate([excess, excess])
        sums = np.concatenate([[0.0], np.cumsum(doubled)])
        phases = np.arange(load.interval_s)
        total = np.zeros(load.interval_s)
        collisions = np.zeros(load.interval_s)
        for offset in load.starts(0):
            begin = (phases + offset) % CYCLE_S
            total += sums[begin + load.window_s] - sums[begin]
            collisions += self.starts[begin]
        return self.weight * total + START_WEIGHT * collisions


def place(
    new: Iterable[Load],
    fixed: Iterable[Load],
    caps: dict[object, tuple[int, float]],
    caps_of,
    now_s: float,
    lead_s: int = 5,
) -> dict[object, float]:
    """The first start (epoch seconds) of each `new` load, given the `fixed` ones.

    caps: cap id -> (limit, weight); caps_of(load) -> [(cap id, units it takes)].
    Loads that recur most often go first: their busy time comes back in every cycle of
    the longer intervals, whose loads then fit in the gaps it leaves. (Placed the other
    way round, five-minute probes folded into one minute may leave a minute's probe no
    gap: the demo's GPU endpoint overlapped itself 276 s an hour.) Within an interval
    the larger first (the hardest to fit); ties keep the given order.
    """
    import numpy as np

    profiles = {cap: Profile.empty(limit, weight) for cap, (limit, weight) in caps.items()}
    for load in fixed:
        if load.phase_s is not None:
            for cap, units in caps_of(load):
                profiles[cap].add(load, load.phase_s, units)
    earliest = math.ceil(now_s) + lead_s
    placed = {}
    for load in sorted(new, key=lambda item: (item.interval_s, -item.busy_s * item.width)):
        cost = np.zeros(load.interval_s)
        for cap, units in caps_of(load):
            cost += profiles[cap].cost(load, units)
        # Among the cheapest phases, the one that comes soonest after `earliest`.
        wait = (np.arange(load.interval_s) - earliest) % load.interval_s
        best = int(np.lexsort((wait, np.round(cost, 6)))[0])
        for cap, units in caps_of(load):
            profiles[cap].add(load, best % CYCLE_S, units)
        placed[load.key] = float(earliest + wait[best])
    return placed


def busy_per_hour_s(loads: Iterable[Load], units_of=lambda load: load.width) -> float:
    return sum(load.busy_per_hour_s(units_of(load)) for load in loads)


def share(busy_per_hour: float, limit: int) -> float:
    """What part of the cap's hour (limit × 3600 cap-seconds) the probes need."""
    return busy_per_hour / (max(1, limit) * 3600.0)


def fitting_interval(
    busy_per_slot_s: float, limit: int, at_least_s: int, target: float = WARN_SHARE
) -> int | None:
    """The shortest nice interval, not below at_least_s, at which probes that together
    hold `busy_per_slot_s` cap-seconds per slot need at most `target` of `limit`."""
    for interval in NICE_INTERVALS_S:
        if interval >= at_least_s and busy_per_slot_s <= target * limit * interval:
            return interval
    return None


# -- estimates before a probe has data -------------------------------------------------------

# A prompt is read much faster than an answer is written: without a measured prefill
# speed, this many times the output speed (llama.cpp on a GPU reads ~20-50×).
PREFILL_TO_OUTPUT = 20.0
# Connection and time to first token, per request, when nothing is measured.
FIRST_TOKEN_S = 0.5
# When neither a claim nor a measurement gives the endpoint's speed: a modest local
# server (llama.cpp, 8B model on a consumer GPU). Erring slow makes the plan cautious.
ASSUMED_OUTPUT_TPS = 50.0


@dataclass(frozen=True)
class Work:
    """What one request of a workload asks for (tokens), and how many run in turn."""

    input_tokens: int
    output_tokens: int
    rounds: int


def estimate_busy_s(
    work: Work, output_tps: float | None, prefill_tps: float | None = None, ttft_s=None
) -> float:
    """Seconds one slot holds its caps: every round reads its prompt and writes its answer."""
    output_tps = output_tps if output_tps and output_tps > 0 else ASSUMED_OUTPUT_TPS
    prefill_tps = prefill_tps if prefill_tps and prefill_tps > 0 else output_tps * PREFILL_TO_OUTPUT
    first = FIRST_TOKEN_S if ttft_s is None else ttft_s
    per_request = first + work.input_tokens / prefill_tps + work.output_tokens / output_tps
    return work.rounds * per_request
