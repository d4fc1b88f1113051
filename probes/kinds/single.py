"""single: one request (role "single"); no group, no summary."""

from __future__ import annotations

from typing import Any

from probes.kinds.base import Footprint, Kind, Measured, Plan


class Single(Kind):
    name = "single"
    title = "one request"
    group = False

    def validate(self, workload: Any) -> dict[str, str]:
        if workload.requests != 1:
            return {"requests": "A single-request workload has 1 request."}
        return {}

    def size(self, workload: Any) -> int:
        return 1

    def footprint(self, workload: Any, cap: int | None = None) -> Footprint:
        return Footprint(1, workload.requests)

    def request_label(self, index: int) -> str:
        return ""

    def requests(self, plan: Plan) -> list[Measured]:
        self.one(plan, 0, plan.seed_of(0), "single")
        return plan.measured


KIND = Single()
