"""cached: one fresh prompt sent twice in a row; cold then warm TTFT, and what the
provider's prompt cache took off the input price."""

from __future__ import annotations

from typing import Any

from probes.engine.result import RunResult
from probes.kinds.base import Kind, Measured, Plan, pct, stop


class Cached(Kind):
    name = "cached"
    title = "cached prefix: one prompt sent twice (cold, then warm)"
    headline = frozenset({"cold_ttft_ms", "ttft_saved_pct", "cost_saved_pct"})

    def validate(self, workload: Any) -> dict[str, str]:
        if workload.requests != 2:
            return {"requests": "A cached workload sends its prompt twice: 2."}
        return {}

    def request_label(self, index: int) -> str:
        return "cold" if index == 0 else "warm"

    def requests(self, plan: Plan) -> list[Measured]:
        seed = plan.seed_of(0)  # both requests: the same prompt, byte for byte
        cold = self.one(plan, 0, seed, "step")
        if not stop(cold.result):
            self.one(plan, 1, seed, "step", repeat=True)
        return plan.measured

    def summarize(
        self, group: RunResult, members: list[Measured], workload: Any, cap: int | None
    ) -> dict[str, Any]:
        results = [m.result for m in members]
        cold = results[0]
        warm = results[1] if len(results) > 1 else None
        # What ranks is what a repeat user meets: the warm request.
        ranked = warm or cold
        group.ttft_ms, group.ttfat_ms = ranked.ttft_ms, ranked.ttfat_ms
        group.e2e_ms, group.output_tps = ranked.e2e_ms, ranked.output_tps
        # Prefill is measured where there is a prompt to process: the cold request (the
        # warm one's uncached share is too small to have a rate, and is not what it tests).
        group.prefill_tps, group.server_prefill_tps = cold.prefill_tps, cold.server_prefill_tps
        # The cached workload's headline, as run fields of the group row (ranked and
        # rolled up); the summary keeps them too, beside the details behind them.
        group.cold_ttft_ms = cold.ttft_ms
        group.ttft_saved_pct = _saved(warm.ttft_ms, cold.ttft_ms) if warm else None
        # What the cache took off the price (a cache discount shows in the cost, given one).
        group.cost_saved_pct = _saved(warm.cost_usd, cold.cost_usd) if warm else None
        return dict(
            cold_ttft_ms=cold.ttft_ms,
            cold_prefill_tps=cold.prefill_tps,
            warm_ttft_ms=warm.ttft_ms if warm else None,
            ttft_saved_pct=group.ttft_saved_pct,
            cold_input_tokens=cold.input_tokens,
            warm_cached_tokens=warm.cached_input_tokens if warm else None,
            cold_cost_usd=cold.cost_usd,
            warm_cost_usd=warm.cost_usd if warm else None,
            # The share of the warm prompt the provider served from its cache.
            cache_hit_pct=pct(warm.cached_input_tokens, warm.input_tokens) if warm else None,
            cost_saved_pct=group.cost_saved_pct,
        )


def _saved(warm: float | None, cold: float | None) -> float | None:
    """100 − warm as a % of cold: what the second sending saved (negative if it cost more)."""
    share = pct(warm, cold)
    return None if share is None else round(100.0 - share, 1)


KIND = Cached()
