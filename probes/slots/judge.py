"""The slot's judging stage: each answer's checks, then the group's summary.

Each measured request gets the verdicts of its workload's answer checks (valid JSON or
tool call, stopped far short: probes/kinds/checks.py); a group gets its summary row, a
RunResult of its own with role "group" and index ``size``, which is what the leaderboard
ranks: the figures its kind sets (probes/kinds/) over what every group has (status,
tokens, cost). A group cut short is closed with a summary saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from probes import kinds
from probes.engine import RunResult
from probes.kinds import Measured
from probes.kinds.base import total
from probes.kinds.checks import stopped_short, verdict
from probes.slots.measure import Measurement
from probes.slots.plan import SlotPlan


@dataclass
class Judged:
    plan: SlotPlan
    rows: list[Measured]  # to record, in order (a group's summary last)
    results: list[RunResult]  # what the slot reports: its requests (or why none was sent)
    error: Exception | None = None  # raised again once the rows are recorded


def judge(measurement: Measurement) -> Judged:
    plan = measurement.plan
    workload = plan.probe.workload
    if measurement.unsent is not None:
        return Judged(plan, [measurement.unsent], [measurement.unsent.result])
    if measurement.resumed:
        why = (
            f"the attempt that began the group stopped after {len(plan.done)} of its "
            f"{plan.size} requests (its worker process ended mid-group: stopped, killed or "
            "out of time); a group cannot be resumed"
        )
        return Judged(plan, [interrupted(workload, plan.size, len(plan.done), why)], [])
    members = [judge_answer(workload, m) for m in measurement.members]
    rows = list(members)
    error = measurement.error
    if plan.kind.group and members:
        if error is None:
            rows.append(summarize(workload, members, plan.size, plan.cap))
        else:
            # Cut short after its first requests (the task's soft time limit, a bug): the
            # summary names the cause, as a retry could not resume the group.
            count = len(plan.done | {m.index for m in members})
            why = (
                f"stopped after {count} of its {plan.size} requests by "
                f"{type(error).__name__}: {error}"
            )
            rows.append(interrupted(workload, plan.size, count, why))
    return Judged(plan, rows, [m.result for m in members], error)


def judge_answer(workload: Any, m: Measured) -> Measured:
    m.output_valid, m.check_detail = verdict(workload, m.result)
    m.stopped_short = stopped_short(workload, m.result)
    return m


def summarize(workload: Any, members: list[Measured], size: int, cap: int | None) -> Measured:
    """The group's own result: the figures that rank it, and the details behind them."""
    kind = kinds.of(workload)
    results = [m.result for m in members]
    first = results[0]
    bad = next((m for m in members if not m.result.ok), None)
    group = RunResult(api=first.api, model=first.model, started_at=first.started_at)
    if bad is not None:
        group.status = bad.result.status
        group.http_status = bad.result.http_status
        group.error = f"request {bad.index}: {bad.result.error or bad.result.status}"
        group.retry_after_s = bad.result.retry_after_s
    elif len(members) < kind.expected(workload, cap):
        group.status, group.error = "truncated", "the group stopped early"
    group.output_tokens = total([r.output_tokens for r in results])
    group.input_tokens = total([r.input_tokens for r in results])
    group.cached_input_tokens = total([r.cached_input_tokens for r in results])
    group.cost_usd = total([r.cost_usd for r in results])
    sources = {r.token_source for r in results if r.token_source}
    group.token_source = sources.pop() if len(sources) == 1 else ("mixed" if sources else None)
    group.cold_connection = any(r.cold_connection for r in results)
    summary: dict[str, Any] = {"kind": workload.kind, "requests": len(members)}
    summary.update(kind.summarize(group, members, workload, cap))
    group.short_output = group.output_tps is None
    return Measured(
        size,
        "group",
        group,
        members[0].seed,
        # Like input_tokens (the provider's), the whole group's prompts.
        total([m.prompt_tokens_o200k for m in members]),
        output_valid=_all_valid(members),
        stopped_short=any(m.stopped_short for m in members),
        group_summary=summary,
    )


def _all_valid(members: list[Measured]) -> bool | None:
    verdicts = [m.output_valid for m in members if m.output_valid is not None]
    return all(verdicts) if verdicts else None


def interrupted(workload: Any, size: int, requests: int, why: str) -> Measured:
    """The summary of a group cut short after ``requests`` requests, saying ``why``."""
    result = RunResult(status="truncated", error=f"group cut short: {why}")
    summary = {"kind": workload.kind, "requests": requests, "interrupted": True, "reason": why}
    return Measured(size, "group", result, group_summary=summary)
