"""loop: sequential steps, each fed the conversation and the previous answer; the total
loop time ranks."""

from __future__ import annotations

from typing import Any

from probes import prompts
from probes.engine.result import RunResult
from probes.kinds.base import Kind, Measured, Plan, median, total
from probes.kinds.requests import prompt_spec


class Loop(Kind):
    name = "loop"
    title = "agent loop: sequential requests, each fed the previous answer"
    feeds_answers = True
    rank_metric = "e2e_ms"

    def requests(self, plan: Plan) -> list[Measured]:
        spec = prompt_spec(plan.workload)
        steps = plan.workload.requests
        seed = plan.seed_of(0)
        messages = prompts.build(spec, seed)
        for step in range(steps):
            size = prompts.input_size(messages)
            # Later steps extend the earlier prompt, which a provider may hold in its cache.
            req = self.request(plan, messages, size if step == 0 else None)
            result = plan.measure_one(req)
            plan.keep(Measured(step, "step", result, seed, size))
            if not result.ok:
                break  # the next step has no answer to build on
            messages = prompts.follow_up(spec, messages, result.text or "", step + 1, steps)
        return plan.measured

    def summarize(
        self, group: RunResult, members: list[Measured], workload: Any, cap: int | None
    ) -> dict[str, Any]:
        results = [m.result for m in members]
        group.ttft_ms = results[0].ttft_ms
        group.ttfat_ms = results[0].ttfat_ms
        group.prefill_tps = results[0].prefill_tps  # the first step's prompt is the fresh one
        group.server_prefill_tps = results[0].server_prefill_tps
        # The loop's time is the sum of its requests: our own gaps between steps excluded.
        group.e2e_ms = total([r.e2e_ms for r in results])
        group.output_tps = median([r.output_tps for r in results])
        return dict(
            total_ms=group.e2e_ms,
            step_e2e_ms=[r.e2e_ms for r in results],
            step_ttft_ms=[r.ttft_ms for r in results],
        )


KIND = Loop()
