"""Vendor claims beside the measurement they describe: like with like, on every surface.

Which claims stand beside an endpoint's figures of a workload is Claim.covers (a claim
about no workload is about one stream alone: never beside a concurrent workload's figures,
nor beside figures pooled over workloads). Which of our figures a claim meets is decided
here: our median of its metric, except that on a concurrent workload a tokens/s claim (one
made about that workload) meets one stream's speed, never the batch's aggregate. The
board, its API, the endpoint page and the claim-kept badge compare through `compared`;
/metrics exports the claims Claim.covers pairs with each measured series.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from dashboard.queries.aggregates import Agg
from dashboard.queries.streams import per_stream_speeds
from probes import kinds
from probes.models import Claim, Endpoint, Workload


@dataclass
class ClaimVsMeasured:
    metric: str
    claim: Claim
    measured: float | None

    @property
    def reference(self) -> float:
        """The end of a claimed range most favourable to the vendor."""
        if self.claim.value_high is None:
            return self.claim.value
        return self.claim.value_high if self.metric == "output_tps" else self.claim.value

    @property
    def share(self) -> float | None:
        """Measured as a fraction of claimed."""
        if self.measured is None or not self.reference:
            return None
        return self.measured / self.reference

    def __str__(self) -> str:
        measured = "—" if self.measured is None else f"{self.measured:,.0f}"
        share = "" if self.share is None else f" · {self.share:.0%}".replace("%", " %")
        return f"claimed {self.claim.display_value} · measured {measured}{share}"


def claims_for(endpoints: list[Endpoint], workload: Workload | None) -> dict[int, list[Claim]]:
    """The claims Claim.covers stands beside each endpoint's figures of `workload`."""
    if not endpoints or workload is None:
        return {e.pk: [] for e in endpoints}
    # A superset in one simple query (an OR per endpoint makes a slow query to build),
    # narrowed by Claim.covers.
    candidates = list(
        Claim.objects.filter(
            Q(endpoint_id__in=[e.pk for e in endpoints])
            | Q(
                endpoint=None,
                provider_id__in={e.provider_id for e in endpoints},
                canonical_model_id__in={e.canonical_model_id for e in endpoints},
            )
        )
    )
    return {e.pk: [c for c in candidates if c.covers(e, workload)] for e in endpoints}


def standing(claims: Iterable[Claim]) -> dict[str, Claim]:
    """One claim per metric, the one whose Claim.precedence stands (the most specific,
    then the newest; undated claims oldest)."""
    chosen: dict[str, Claim] = {}
    for c in sorted(claims, key=Claim.precedence):
        chosen[c.metric] = c
    return chosen


def compared(
    endpoints: list[Endpoint],
    workload: Workload | None,
    aggs: Mapping[int, Agg],
    stream_tps: Mapping[int, float | None] | None = None,
) -> dict[int, list[ClaimVsMeasured]]:
    """Per endpoint, each standing claim beside the figure it describes: `aggs` hold our
    figures of `workload` per endpoint, `stream_tps` a concurrent workload's per-stream
    speeds (dashboard/queries/streams.py)."""
    per_stream = workload is not None and kinds.of(workload).streams
    stream_tps = stream_tps or {}
    out = {}
    for e, claims in claims_for(endpoints, workload).items():
        agg = aggs.get(e, Agg())
        out[e] = [
            ClaimVsMeasured(
                metric,
                claim,
                stream_tps.get(e)
                if per_stream and metric == "output_tps"
                else agg.percentile(metric, 50),
            )
            for metric, claim in sorted(standing(claims).items())
        ]
    return out


def compared_over(
    endpoints: list[Endpoint],
    workload: Workload | None,
    aggs: Mapping[int, Agg],
    start: datetime,
    now: datetime,
    region: str,
) -> dict[int, list[ClaimVsMeasured]]:
    """`compared`, with a concurrent workload's per-stream speeds over [start, now]."""
    if workload is None:
        return compared(endpoints, workload, aggs)
    ids = [e.pk for e in endpoints]
    return compared(endpoints, workload, aggs, per_stream_speeds(ids, workload, start, now, region))
