"""Run a workload: one request, or a run group and the summary that ranks it.

* single: one request (``role`` "single").
* cached: one fresh prompt sent twice in a row; cold then warm TTFT, and what the
  provider's prompt cache took off the input price.
* loop: sequential steps, each fed the conversation and the previous answer; the total
  loop time ranks.
* parallel: one request alone (the baseline), then N at once; aggregate output tok/s
  and each request's slowdown against the baseline.
* sweep: the concurrency curve (probes/sweep.py): 1, 2, 4 … fresh requests at once, up
  to the endpoint's cap; per step per-request and aggregate tok/s, TTFT, goodput.

Each request is measured and handed to ``sink`` at once (so it is recorded even if the
group dies later) with role "step"; then the group's summary, a RunResult of its own
with role "group" and index ``group_size``, is what the leaderboard ranks. Plain logic:
the caller supplies how to build and measure requests (the runner wraps concurrency
caps around them, ``measure`` does not).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probes import checks, prompts, sweep, workloads
from probes.engine import ProbeRequest, RunResult

# (messages, extra body fields, extra headers, include_text) -> the request to measure.
RequestFactory = Callable[
    [list[dict[str, Any]], dict[str, Any], dict[str, str], bool], ProbeRequest
]


@dataclass
class Measured:
    index: int
    role: str  # "single", "step" or "group"
    result: RunResult
    seed: int | None = None
    prompt_tokens_o200k: int | None = None
    output_valid: bool | None = None
    check_detail: str = ""
    stopped_short: bool = False
    group_summary: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """What ``measure --json`` prints for this request (or the group)."""
        out = self.result.to_dict(include_text=False)
        out.update(
            request_index=self.index,
            role=self.role,
            prompt_seed=self.seed,
            prompt_tokens_o200k=self.prompt_tokens_o200k,
            output_valid=self.output_valid,
            check_detail=self.check_detail or None,
            stopped_short=self.stopped_short,
        )
        if self.role == "group":
            out["group"] = True
            out["group_summary"] = self.group_summary
        return out


@dataclass
class Plan:
    """How to run one workload against one endpoint."""

    workload: Any  # a probes.models.Workload (or a workloads.WorkloadSeed)
    api: str
    new_request: RequestFactory
    seed_of: Callable[[int], int]  # request index -> prompt seed
    measure_one: Callable[[ProbeRequest], RunResult]
    measure_many: Callable[[list[ProbeRequest]], list[RunResult]]
    sink: Callable[[Measured], None] = lambda m: None
    done: set[int] = field(default_factory=set)  # indexes already recorded (redelivery)
    cap: int | None = None  # requests at once the endpoint takes: a sweep stops there


def group_size(workload: Any) -> int:
    if workload.kind == "sweep":
        return sweep.full_size(workload)
    if workload.kind == "parallel":
        return workload.requests + 1
    return workload.requests if workload.kind in ("cached", "loop") else 1


def footprint(workload: Any, cap: int | None = None) -> tuple[int, int]:
    """(the widest step's concurrent requests, requests in turn): what a run must reserve
    before its first request, and for how long (a Workload row says; the planner reads
    the same properties; a sweep's ladder depends on the provider's cap)."""
    if workload.kind == "sweep":
        steps = sweep.ladder(workload, cap)
        return (max(steps) if steps else 1), max(1, len(steps))
    return workload.concurrent_requests, workload.rounds


def run(plan: Plan) -> list[Measured]:
    kind = plan.workload.kind
    if kind == "single":
        if 0 in plan.done:
            return []
        return [_emit(plan, _one(plan, 0, plan.seed_of(0), "single"))]
    size = group_size(plan.workload)
    if size in plan.done:
        return []  # the group is complete, summary and all
    if plan.done:
        # A redelivered slot whose group was cut short: its steps cannot be resumed
        # (a loop needs the answers, a parallel batch its partners); close it as such.
        # Its caps were held from the first request (probes/caps.py), and a failure
        # the attempt saw is summarised by it: what is left is a process that ended.
        why = (
            f"the attempt that began the group stopped after {len(plan.done)} of its "
            f"{size} requests (its worker process ended mid-group: stopped, killed or out "
            "of time); a group cannot be resumed"
        )
        return [_emit(plan, interrupted(plan.workload, size, len(plan.done), why))]
    runner = {"cached": _cached, "loop": _loop, "parallel": _parallel, "sweep": _sweep}[kind]
    members = runner(plan)
    summary = summarize(plan.workload, members, size, plan.cap)
    return [*members, _emit(plan, summary)]


# -- one request -----------------------------------------------------------------------


def _request(plan: Plan, messages: list[dict[str, Any]], fresh_tokens: int | None) -> ProbeRequest:
    """``fresh_tokens``: our count of a prompt the provider cannot have cached (for the
    prefill rate when usage has none); None for a repeated or extended prompt."""
    workload = plan.workload
    body, headers = workloads.request_extras(workload, plan.api)
    req = plan.new_request(messages, body, headers, checks.needs_text(workload))
    req.prompt_tokens = fresh_tokens
    return req


def _judge(plan: Plan, m: Measured) -> Measured:
    m.output_valid, m.check_detail = checks.verdict(plan.workload, m.result)
    m.stopped_short = checks.stopped_short(plan.workload, m.result)
    return m


def _one(plan: Plan, index: int, seed: int, role: str, *, repeat: bool = False) -> Measured:
    messages = prompts.build(workloads.prompt_spec(plan.workload), seed)
    size = prompts.input_size(messages)
    result = plan.measure_one(_request(plan, messages, None if repeat else size))
    return _judge(plan, Measured(index, role, result, seed, size))


def _emit(plan: Plan, m: Measured) -> Measured:
    plan.sink(m)
    return m


def _stop(result: RunResult) -> bool:
    """After this, a group goes no further: the provider asked us to wait."""
    return result.status == "rate_limited"


# -- the groups ------------------------------------------------------------------------


def _cached(plan: Plan) -> list[Measured]:
    seed = plan.seed_of(0)  # both requests: the same prompt, byte for byte
    cold = _emit(plan, _one(plan, 0, seed, "step"))
    if _stop(cold.result):
        return [cold]
    return [cold, _emit(plan, _one(plan, 1, seed, "step", repeat=True))]


def _loop(plan: Plan) -> list[Measured]:
    spec = workloads.prompt_spec(plan.workload)
    steps = plan.workload.requests
    seed = plan.seed_of(0)
    messages = prompts.build(spec, seed)
    members: list[Measured] = []
    for step in range(steps):
        size = prompts.input_size(messages)
        # Later steps extend the earlier prompt, which a provider may hold in its cache.
        result = plan.measure_one(_request(plan, messages, size if step == 0 else None))
        m = Measured(step, "step", result, seed, size)
        members.append(_emit(plan, _judge(plan, m)))
        if not result.ok:
            break  # the next step has no answer to build on
        messages = prompts.follow_up(spec, messages, result.text or "", step + 1, steps)
    return members


def _parallel(plan: Plan) -> list[Measured]:
    baseline = _emit(plan, _one(plan, 0, plan.seed_of(0), "step"))
    if _stop(baseline.result):
        return [baseline]
    spec = workloads.prompt_spec(plan.workload)
    indexes = range(1, plan.workload.requests + 1)
    batch = [prompts.build(spec, plan.seed_of(i)) for i in indexes]
    sizes = [prompts.input_size(messages) for messages in batch]
    results = plan.measure_many(
        [_request(plan, messages, size) for messages, size in zip(batch, sizes, strict=True)]
    )
    members = [baseline]
    for i, size, result in zip(indexes, sizes, results, strict=True):
        m = Measured(i, "step", result, plan.seed_of(i), size)
        members.append(_emit(plan, _judge(plan, m)))
    return members


def _sweep(plan: Plan) -> list[Measured]:
    spec = workloads.prompt_spec(plan.workload)
    members: list[Measured] = []
    for concurrency in sweep.ladder(plan.workload, plan.cap):
        indexes = range(len(members), len(members) + concurrency)
        batch = [prompts.build(spec, plan.seed_of(i)) for i in indexes]
        sizes = [prompts.input_size(messages) for messages in batch]
        results = plan.measure_many(
            [_request(plan, messages, size) for messages, size in zip(batch, sizes, strict=True)]
        )
        for i, size, result in zip(indexes, sizes, results, strict=True):
            members.append(
                _emit(plan, _judge(plan, Measured(i, "step", result, plan.seed_of(i), size)))
            )
        if any(_stop(r) for r in results):
            break
    return members


# -- the summary -----------------------------------------------------------------------


def _sum(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return round(sum(known), 10) if known else None


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


def _pct(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 1)


def summarize(
    workload: Any, members: list[Measured], size: int, cap: int | None = None
) -> Measured:
    """The group's own result: the figures that rank it, and the details behind them."""
    results = [m.result for m in members]
    first = results[0]
    bad = next((m for m in members if not m.result.ok), None)
    group = RunResult(api=first.api, model=first.model, started_at=first.started_at)
    if bad is not None:
        group.status = bad.result.status
        group.http_status = bad.result.http_status
        group.error = f"request {bad.index}: {bad.result.error or bad.result.status}"
        group.retry_after_s = bad.result.retry_after_s
    elif len(members) < _expected(workload, size, cap):
        group.status, group.error = "truncated", "the group stopped early"
    group.output_tokens = _sum([r.output_tokens for r in results])
    group.input_tokens = _sum([r.input_tokens for r in results])
    group.cached_input_tokens = _sum([r.cached_input_tokens for r in results])
    group.cost_usd = _sum([r.cost_usd for r in results])
    sources = {r.token_source for r in results if r.token_source}
    group.token_source = sources.pop() if len(sources) == 1 else ("mixed" if sources else None)
    group.cold_connection = any(r.cold_connection for r in results)
    summary: dict[str, Any] = {"kind": workload.kind, "requests": len(members)}
    if workload.kind == "cached":
        _cached_summary(group, results, summary)
    elif workload.kind == "loop":
        _loop_summary(group, results, summary)
    elif workload.kind == "sweep":
        sweep.summary(group, _sweep_steps(workload, members, cap), workload, summary)
    else:
        _parallel_summary(group, results, summary)
    group.short_output = group.output_tps is None
    return Measured(
        size,
        "group",
        group,
        members[0].seed,
        # Like input_tokens (the provider's), the whole group's prompts.
        _sum([m.prompt_tokens_o200k for m in members]),
        output_valid=_all_valid(members),
        stopped_short=any(m.stopped_short for m in members),
        group_summary=summary,
    )


def _expected(workload: Any, size: int, cap: int | None) -> int:
    """Requests a complete group has (a sweep's ladder stops at the cap)."""
    if workload.kind == "sweep":
        return sum(sweep.ladder(workload, cap))
    return size - (1 if workload.kind == "parallel" else 0)


def _sweep_steps(workload: Any, members: list[Measured], cap: int | None) -> list[dict]:
    steps, start = [], 0
    for concurrency in sweep.ladder(workload, cap):
        batch = [m.result for m in members[start : start + concurrency]]
        if len(batch) < concurrency:
            break
        steps.append(sweep.step_figures(concurrency, batch, workload))
        start += concurrency
    return steps


def _all_valid(members: list[Measured]) -> bool | None:
    verdicts = [m.output_valid for m in members if m.output_valid is not None]
    return all(verdicts) if verdicts else None


def _cached_summary(group: RunResult, results: list[RunResult], summary: dict) -> None:
    cold = results[0]
    warm = results[1] if len(results) > 1 else None
    # What ranks is what a repeat user meets: the warm request.
    ranked = warm or cold
    group.ttft_ms, group.ttfat_ms = ranked.ttft_ms, ranked.ttfat_ms
    group.e2e_ms, group.output_tps = ranked.e2e_ms, ranked.output_tps
    # Prefill is measured where there is a prompt to process: the cold request (the warm
    # one's uncached share is too small to have a rate, and is not what it tests).
    group.prefill_tps, group.server_prefill_tps = cold.prefill_tps, cold.server_prefill_tps
    # The cached workload's headline, as run fields of the group row (ranked and rolled
    # up); the summary keeps them too, beside the details behind them.
    group.cold_ttft_ms = cold.ttft_ms
    group.ttft_saved_pct = _saved(warm.ttft_ms, cold.ttft_ms) if warm else None
    # What the cache took off the price (a cache discount shows in the cost, given one).
    group.cost_saved_pct = _saved(warm.cost_usd, cold.cost_usd) if warm else None
    summary.update(
        cold_ttft_ms=cold.ttft_ms,
        cold_prefill_tps=cold.prefill_tps,
        warm_ttft_ms=warm.ttft_ms if warm else None,
        ttft_saved_pct=group.ttft_saved_pct,
        cold_input_tokens=cold.input_tokens,
        warm_cached_tokens=warm.cached_input_tokens if warm else None,
        cold_cost_usd=cold.cost_usd,
        warm_cost_usd=warm.cost_usd if warm else None,
        # The share of the warm prompt the provider served from its cache.
        cache_hit_pct=_pct(warm.cached_input_tokens, warm.input_tokens) if warm else None,
        cost_saved_pct=group.cost_saved_pct,
    )


def _saved(warm: float | None, cold: float | None) -> float | None:
    """100 − warm as a % of cold: what the second sending saved (negative if it cost more)."""
    share = _pct(warm, cold)
    return None if share is None else round(100.0 - share, 1)


def _loop_summary(group: RunResult, results: list[RunResult], summary: dict) -> None:
    group.ttft_ms = results[0].ttft_ms
    group.ttfat_ms = results[0].ttfat_ms
    group.prefill_tps = results[0].prefill_tps  # the first step's prompt is the fresh one
    group.server_prefill_tps = results[0].server_prefill_tps
    # The loop's time is the sum of its requests: our own gaps between steps excluded.
    group.e2e_ms = _sum([r.e2e_ms for r in results])
    group.output_tps = _median([r.output_tps for r in results])
    summary.update(
        total_ms=group.e2e_ms,
        step_e2e_ms=[r.e2e_ms for r in results],
        step_ttft_ms=[r.ttft_ms for r in results],
    )


def _parallel_summary(group: RunResult, results: list[RunResult], summary: dict) -> None:
    single, batch = results[0], results[1:]
    spans = [
        (r.t0_ns, r.t0_ns + int(r.e2e_ms * 1e6))
        for r in batch
        if r.t0_ns is not None and r.e2e_ms is not None
    ]
    wall_ms = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e6 if spans else None
    tokens = _sum([r.output_tokens for r in batch if r.ok])
    aggregate = round(tokens / (wall_ms / 1e3), 3) if tokens and wall_ms else None
    per_request = _median([r.output_tps for r in batch if r.ok])
    group.ttft_ms = _median([r.ttft_ms for r in batch if r.ok])
    # Every latency column the requests have, as the TTFT: the batch's median (a row with
    # a TTFT and no first answer would read as "no answer").
    group.ttfat_ms = _median([r.ttfat_ms for r in batch if r.ok])
    group.prefill_tps = _median([r.prefill_tps for r in batch if r.ok])
    group.server_prefill_tps = _median([r.server_prefill_tps for r in batch if r.ok])
    group.e2e_ms = round(wall_ms, 3) if wall_ms is not None else None
    # The aggregate rate is the throughput figure of a concurrent workload. The group's
    # output tokens are the ones that rate counts (the batch's), so a row's tokens and
    # tok/s describe the same requests; cost and input tokens stay the whole group's
    # (the baseline is sent and paid for too).
    group.output_tps = aggregate
    # Each stream's slowdown under load: the parallel workload's second headline.
    group.slowdown = (
        round(single.output_tps / per_request, 3) if single.output_tps and per_request else None
    )
    group.output_tokens = tokens
    summary.update(
        concurrency=len(batch),
        aggregate_output_tps=aggregate,
        batch_output_tokens=tokens,
        single_output_tokens=single.output_tokens,
        single_output_tps=single.output_tps,
        per_request_output_tps_p50=per_request,
        single_ttft_ms=single.ttft_ms,
        ttft_ms_p50=group.ttft_ms,
        slowdown=group.slowdown,
        wall_ms=group.e2e_ms,
    )


def interrupted(workload: Any, size: int, requests: int, why: str) -> Measured:
    """The summary of a group cut short after ``requests`` requests, saying ``why``."""
    result = RunResult(status="truncated", error=f"group cut short: {why}")
    summary = {"kind": workload.kind, "requests": requests, "interrupted": True, "reason": why}
    return Measured(size, "group", result, group_summary=summary)
