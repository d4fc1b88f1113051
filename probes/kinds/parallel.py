"""parallel: one request alone (the baseline), then N at once; aggregate output tok/s
and each request's slowdown against the baseline."""

from __future__ import annotations

from typing import Any

from probes.engine.result import RunResult
from probes.kinds.base import Footprint, Kind, Measured, Plan, median, stop, total


class Parallel(Kind):
    name = "parallel"
    title = "concurrent requests, after one alone for comparison"
    streams = True
    headline = frozenset({"stream_tps", "slowdown"})
    rank_metric = "stream_tps"  # each stream's speed; the aggregate and slowdown beside it

    def size(self, workload: Any) -> int:
        return workload.requests + 1

    def footprint(self, workload: Any, cap: int | None = None) -> Footprint:
        # The batch's slots are taken before the baseline and held to the batch's end:
        # two requests in turn, the second N wide.
        return Footprint(workload.requests, 2)

    def expected(self, workload: Any, cap: int | None = None) -> int:
        return workload.requests

    def request_label(self, index: int) -> str:
        return "alone" if index == 0 else f"concurrent {index}"

    def requests(self, plan: Plan) -> list[Measured]:
        baseline = self.one(plan, 0, plan.seed_of(0), "step")
        if not stop(baseline.result):
            self.batch(plan, range(1, plan.workload.requests + 1))
        return plan.measured

    def summarize(
        self, group: RunResult, members: list[Measured], workload: Any, cap: int | None
    ) -> dict[str, Any]:
        results = [m.result for m in members]
        single, batch = results[0], results[1:]
        spans = [
            (r.t0_ns, r.t0_ns + int(r.e2e_ms * 1e6))
            for r in batch
            if r.t0_ns is not None and r.e2e_ms is not None
        ]
        wall_ms = (max(e for _, e in spans) - min(s for s, _ in spans)) / 1e6 if spans else None
        tokens = total([r.output_tokens for r in batch if r.ok])
        aggregate = round(tokens / (wall_ms / 1e3), 3) if tokens and wall_ms else None
        per_request = median([r.output_tps for r in batch if r.ok])
        group.ttft_ms = median([r.ttft_ms for r in batch if r.ok])
        # Every latency column the requests have, as the TTFT: the batch's median (a row
        # with a TTFT and no first answer would read as "no answer").
        group.ttfat_ms = median([r.ttfat_ms for r in batch if r.ok])
        group.prefill_tps = median([r.prefill_tps for r in batch if r.ok])
        group.server_prefill_tps = median([r.server_prefill_tps for r in batch if r.ok])
        group.e2e_ms = round(wall_ms, 3) if wall_ms is not None else None
        # The aggregate rate is the throughput figure of a concurrent workload. The
        # group's output tokens are the ones that rate counts (the batch's), so a row's
        # tokens and tok/s describe the same requests; cost and input tokens stay the
        # whole group's (the baseline is sent and paid for too).
        group.output_tps = aggregate
        # Each stream's slowdown under load: the parallel workload's second headline.
        group.slowdown = (
            round(single.output_tps / per_request, 3) if single.output_tps and per_request else None
        )
        group.output_tokens = tokens
        return dict(
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


KIND = Parallel()
