"""sweep: the concurrency curve, the same fresh-prompt request at 1, 2, 4, 8 … at once.

Each step of the ladder (the workload's ``params["ladder"]``, default 1, 2, 4, 8, 16,
never above the workload's ``requests`` nor the endpoint's cap or slots) sends that many
fresh prompts at once and records per-request tok/s (the median), aggregate tok/s (all
their output tokens over the step's wall time), TTFT p50/p95 and goodput: the requests per
second of the step whose TTFT and time per output token both met the service-level target
(``params["ttft_slo_ms"]``, ``params["tpot_slo_ms"]``, editable in the admin).

The knee is the last step whose doubling still bought at least KNEE_GAIN more aggregate
throughput: past it, more concurrency only slows each user down.
"""

from __future__ import annotations

import statistics
from typing import Any

from probes.engine.result import RunResult
from probes.kinds.base import Footprint, Kind, Measured, Plan, stop

DEFAULT_LADDER = (1, 2, 4, 8, 16)
DEFAULT_TTFT_SLO_MS = 2000.0
DEFAULT_TPOT_SLO_MS = 100.0
KNEE_GAIN = 1.10  # +10 % aggregate for the next step, or the curve has flattened


def ladder(workload: Any, cap: int | None = None) -> list[int]:
    """The concurrency steps to run: the workload's ladder up to its requests and the cap."""
    params = workload.params or {}
    steps = params.get("ladder") or DEFAULT_LADDER
    top = min(workload.requests, cap) if cap else workload.requests
    return sorted({int(s) for s in steps if isinstance(s, int) and 1 <= s <= top})


def slo(workload: Any) -> tuple[float, float]:
    params = workload.params or {}
    return (
        float(params.get("ttft_slo_ms", DEFAULT_TTFT_SLO_MS)),
        float(params.get("tpot_slo_ms", DEFAULT_TPOT_SLO_MS)),
    )


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 3)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 3)


def step_figures(concurrency: int, results: list[RunResult], workload: Any) -> dict[str, Any]:
    """One step's row of the curve."""
    ok = [r for r in results if r.ok]
    spans = [
        (r.t0_ns, r.t0_ns + int(r.e2e_ms * 1e6))
        for r in results
        if r.t0_ns is not None and r.e2e_ms is not None
    ]
    wall_s = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e9 if spans else None
    tokens = sum(r.output_tokens or 0 for r in ok)
    ttft_slo, tpot_slo = slo(workload)
    good = [
        r
        for r in ok
        if r.ttft_ms is not None
        and r.ttft_ms <= ttft_slo
        and (r.tpot_ms is None or r.tpot_ms <= tpot_slo)
    ]
    per_request = [r.output_tps for r in ok if r.output_tps is not None]
    ttfts = sorted(r.ttft_ms for r in ok if r.ttft_ms is not None)
    return {
        "concurrency": concurrency,
        "requests": len(results),
        "ok": len(ok),
        "per_request_tps": round(statistics.median(per_request), 3) if per_request else None,
        "aggregate_tps": round(tokens / wall_s, 3) if wall_s and tokens else None,
        "ttft_ms_p50": _p(ttfts, 50),
        "ttft_ms_p95": _p(ttfts, 95),
        "goodput": round(len(good) / wall_s, 3) if wall_s else None,
        "slo_met": len(good),
        "wall_ms": round(wall_s * 1e3, 3) if wall_s else None,
    }


def knee(steps: list[dict[str, Any]]) -> int | None:
    """The concurrency past which aggregate throughput grows less than KNEE_GAIN."""
    rated = [s for s in steps if s["aggregate_tps"]]
    for here, there in zip(rated, rated[1:], strict=False):
        if there["aggregate_tps"] < KNEE_GAIN * here["aggregate_tps"]:
            return here["concurrency"]
    return None  # still rising at the top of the ladder (or nothing measured)


def summary(group: RunResult, steps: list[dict[str, Any]], workload: Any, out: dict) -> None:
    """The group's figures: its best aggregate rate ranks; the curve rides in the summary."""
    rated = [s for s in steps if s["aggregate_tps"]]
    best = max(rated, key=lambda s: s["aggregate_tps"]) if rated else None
    group.output_tps = best["aggregate_tps"] if best else None
    group.ttft_ms = steps[0]["ttft_ms_p50"] if steps else None
    ttft_slo, tpot_slo = slo(workload)
    out.update(
        steps=steps,
        knee=knee(steps),
        ttft_slo_ms=ttft_slo,
        tpot_slo_ms=tpot_slo,
        best_aggregate_tps=group.output_tps,
    )


class Sweep(Kind):
    name = "sweep"
    title = "concurrency sweep: 1, 2, 4 … requests at once up to the cap (the curve)"
    curve = True

    def size(self, workload: Any) -> int:
        """Requests in the whole ladder (the group's summary takes the next index)."""
        return sum(ladder(workload))

    def footprint(self, workload: Any, cap: int | None = None) -> Footprint:
        # The widest step under the cap, for as many rounds as the ladder has steps:
        # what the runner holds and what the planner must plan for.
        steps = ladder(workload, cap)
        return Footprint(max(steps) if steps else 1, max(1, len(steps)))

    def expected(self, workload: Any, cap: int | None = None) -> int:
        return sum(ladder(workload, cap))  # the ladder stops at the cap

    def requests(self, plan: Plan) -> list[Measured]:
        for concurrency in ladder(plan.workload, plan.cap):
            start = len(plan.measured)
            step = self.batch(plan, range(start, start + concurrency))
            if any(stop(m.result) for m in step):
                break
        return plan.measured

    def summarize(
        self, group: RunResult, members: list[Measured], workload: Any, cap: int | None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        summary(group, _steps(workload, members, cap), workload, out)
        return out


def _steps(workload: Any, members: list[Measured], cap: int | None) -> list[dict]:
    steps, start = [], 0
    for concurrency in ladder(workload, cap):
        batch = [m.result for m in members[start : start + concurrency]]
        if len(batch) < concurrency:
            break
        steps.append(step_figures(concurrency, batch, workload))
        start += concurrency
    return steps


KIND = Sweep()
