"""The capacity plan, from the database: how long each probe's slot holds its caps, where
new probes start (the planner, probes/scheduling/planner.py) and how much of each cap the
active probes need (the admin, the add-endpoint proposal and /status's `capacity` check).

A probe's busy time is its recent median request duration × its requests in turn; before
it has data, an estimate from its workload's tokens and its endpoint's speed: measured on
any workload in the last day, else claimed (a Claim of output tok/s), else assumed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q

from probes import kinds
from probes.models import Claim, Endpoint, Probe, Workload
from probes.scheduling import planner

# Recent enough to follow a server's changes, long enough for a median.
RECENT = timedelta(days=1)
RECENT_RUNS = 20

_MEDIAN_SQL = """
SELECT {key}, percentile_cont(0.5) WITHIN GROUP (ORDER BY {column})
FROM (
    SELECT {key}, {column}, row_number() OVER (PARTITION BY {key} ORDER BY started_at DESC) AS n
    FROM probes_proberun
    WHERE started_at >= %s AND {column} IS NOT NULL AND role <> 'group' AND {key} = ANY(%s)
) recent
WHERE n <= %s
GROUP BY {key}
"""


def _medians(key: str, column: str, ids: list[int]) -> dict[int, float]:
    if not ids:
        return {}
    since = datetime.now(UTC) - RECENT
    with connection.cursor() as cursor:
        cursor.execute(_MEDIAN_SQL.format(key=key, column=column), [since, ids, RECENT_RUNS])
        return {row[0]: float(row[1]) for row in cursor.fetchall()}


@dataclass(frozen=True)
class Speed:
    output_tps: float | None
    prefill_tps: float | None = None
    ttft_s: float | None = None
    source: str = "assumed"  # "measured", "claimed" or "assumed"


def claimed_tps(endpoint: Endpoint) -> float | None:
    """The endpoint's claimed output speed (any use case), if a claim gives one."""
    claim = (
        Claim.objects.filter(metric="output_tps", workload__isnull=True)
        .filter(
            Q(endpoint=endpoint)
            | Q(provider_id=endpoint.provider_id, canonical_model_id=endpoint.canonical_model_id)
        )
        .order_by("endpoint_id")
        .first()
    )
    return claim.value if claim else None


def endpoint_speeds(endpoints: Iterable[Endpoint]) -> dict[int, Speed]:
    endpoints = list(endpoints)
    ids = [e.pk for e in endpoints]
    tps = _medians("endpoint_id", "output_tps", ids)
    prefill = _medians("endpoint_id", "prefill_tps", ids)
    ttft = _medians("endpoint_id", "ttft_ms", ids)
    speeds = {}
    for endpoint in endpoints:
        if endpoint.pk in tps:
            first = ttft.get(endpoint.pk)
            speeds[endpoint.pk] = Speed(
                tps[endpoint.pk], prefill.get(endpoint.pk), first and first / 1000, "measured"
            )
        elif (claimed := claimed_tps(endpoint)) is not None:
            speeds[endpoint.pk] = Speed(claimed, source="claimed")
        else:
            speeds[endpoint.pk] = Speed(None)
    return speeds


def work_of(
    workload: Workload, max_tokens: int | None = None, cap: int | None = None
) -> planner.Work:
    # A workload without a target length may write up to its max tokens: plan for that.
    output = workload.target_output_tokens or max_tokens or workload.max_tokens
    rounds = kinds.footprint(workload, cap).rounds  # as the slot holds its caps
    return planner.Work(workload.approx_input_tokens or 0, output, rounds)


def estimate(
    workload: Workload, speed: Speed, max_tokens: int | None = None, cap: int | None = None
) -> float:
    """Seconds a slot of the workload holds its caps, under a provider's ``cap``."""
    work = work_of(workload, max_tokens, cap)
    return planner.estimate_busy_s(work, speed.output_tps, speed.prefill_tps, speed.ttft_s)


def footprint(probe: Probe) -> kinds.Footprint:
    """What one slot of the probe holds: the same figures the slot takes
    (probes/slots/plan.py), a sweep's ladder cut at its provider's cap."""
    return kinds.footprint(probe.workload, probe.endpoint.provider.max_concurrency)


@dataclass(frozen=True)
class ProbeBusy:
    probe: Probe
    busy_s: float
    source: str  # "measured" (its own runs), or its speed's source for an estimate

    def load(self, interval_s: int | None = None) -> planner.Load:
        probe = self.probe
        return planner.Load(
            key=probe.pk,
            interval_s=interval_s or probe.interval_s,
            busy_s=self.busy_s,
            width=footprint(probe).width,
            jitter_s=probe.jitter_s,
            phase_s=int(probe.next_run_at.timestamp()) % planner.CYCLE_S,
        )


def busy_of(probes: Iterable[Probe], given_tps: float | None = None) -> list[ProbeBusy]:
    """Each probe's expected busy seconds per slot, and where the figure comes from.
    given_tps: the speed the operator gave for endpoints nothing measured or claimed."""
    probes = list(probes)
    measured_ms = _medians("probe_id", "e2e_ms", [p.pk for p in probes])
    speeds = endpoint_speeds({p.endpoint_id: p.endpoint for p in probes}.values())
    if given_tps:
        given = Speed(given_tps, source="given")
        speeds = {pk: given if s.source == "assumed" else s for pk, s in speeds.items()}
    result = []
    for probe in probes:
        if probe.pk in measured_ms:
            busy = measured_ms[probe.pk] / 1000 * footprint(probe).rounds
            result.append(ProbeBusy(probe, busy, "measured"))
        else:
            speed = speeds[probe.endpoint_id]
            cap = probe.endpoint.provider.max_concurrency
            busy = estimate(probe.workload, speed, probe.max_tokens, cap)
            result.append(ProbeBusy(probe, busy, speed.source))
    return result


# -- caps ------------------------------------------------------------------------------------


def provider_cap(provider_id: int) -> tuple[str, int]:
    return ("provider", provider_id)


def worker_cap(region: str) -> tuple[str, str]:
    return ("region", region)


def endpoint_cap(endpoint_id: int) -> tuple[str, int]:
    # One probe at a time, whatever its width: our own probes never measure each other.
    return ("endpoint", endpoint_id)


def _active_related(probes: list[Probe]):
    providers = {p.endpoint.provider_id for p in probes}
    regions = {p.region for p in probes}
    return (
        Probe.objects.active()
        .filter(Q(endpoint__provider_id__in=providers) | Q(region__in=regions))
        .select_related("endpoint__provider", "workload")
    )


@transaction.atomic
def replan(
    probes: Iterable[Probe], now: datetime | None = None, given_tps: float | None = None
) -> dict[int, datetime]:
    """Give each probe a first start that spreads it from the probes it shares a cap
    with (the other active probes of its provider, of its endpoint and of its region's
    workers), and save it. Returns the new next_run_at per probe id."""
    probes = [p for p in probes if p.pk is not None]
    if not probes:
        return {}
    now = now or datetime.now(UTC)
    moving = {p.pk for p in probes}
    others = [p for p in _active_related(probes) if p.pk not in moving]
    busy = {b.probe.pk: b for b in busy_of([*probes, *others], given_tps)}
    caps: dict[object, tuple[int, float]] = {}
    for probe in [*probes, *others]:
        provider = probe.endpoint.provider
        caps[provider_cap(provider.pk)] = (provider.max_concurrency, planner.PROVIDER_WEIGHT)
        caps[worker_cap(probe.region)] = (
            settings.WORKER_MAX_CONCURRENT_PROBES,
            planner.WORKER_WEIGHT,
        )
        caps[endpoint_cap(probe.endpoint_id)] = (1, planner.ENDPOINT_WEIGHT)
    by_id = {p.pk: p for p in [*probes, *others]}

    def caps_of(load: planner.Load):
        probe = by_id[load.key]
        return [
            (provider_cap(probe.endpoint.provider_id), load.width),
            (worker_cap(probe.region), 1),
            (endpoint_cap(probe.endpoint_id), 1),
        ]

    new = [busy[p.pk].load() for p in probes]
    fixed = [busy[p.pk].load() for p in others]
    starts = planner.place(new, fixed, caps, caps_of, now.timestamp())
    planned = {}
    for probe in probes:
        when = datetime.fromtimestamp(starts[probe.pk], tz=UTC)
        # A probe that ran keeps a last slot one interval before its new next (a bookmark,
        # as dispatch.skip_missed leaves): due_at() then waits for the planned start.
        last = probe.last_dispatched_at and when - timedelta(seconds=probe.interval_s)
        Probe.objects.filter(pk=probe.pk).update(next_run_at=when, last_dispatched_at=last)
        probe.next_run_at, probe.last_dispatched_at = when, last
        planned[probe.pk] = when
    return planned


# -- the plan you can read -------------------------------------------------------------------


@dataclass
class CapUse:
    """What the probes sharing one cap need of it, per hour."""

    kind: str  # "provider" or "region"
    ident: object  # the provider's id, or the region
    name: str
    limit: int
    need_per_hour_s: float = 0.0
    probes: int = 0
    sources: set[str] = field(default_factory=set)

    @property
    def share(self) -> float:
        return planner.share(self.need_per_hour_s, self.limit)

    @property
    def state(self) -> str:
        if self.share > 1.0:
            return "over"
        return "tight" if self.share > planner.WARN_SHARE else "fits"

    def describe(self) -> str:
        slots = "slot" if self.limit == 1 else "slots"
        owner = self.name if self.kind == "provider" else f"region {self.name}'s worker"
        return (
            f"{owner}: probes need {self.share:.0%} of {self.limit} {slots} "
            f"(~{self.need_per_hour_s:,.0f} s of every {self.limit * 3600:,} s per hour)"
        )


def capacity_plan(probes: Iterable[Probe] | None = None) -> list[CapUse]:
    """Per provider and per region (one worker's WORKER_MAX_CONCURRENT_PROBES): the
    active probes' expected use of the cap, busiest first."""
    if probes is None:
        probes = Probe.objects.active().select_related("endpoint__provider", "workload")
    uses: dict[object, CapUse] = {}
    for item in busy_of(probes):
        probe = item.probe
        provider = probe.endpoint.provider
        width = footprint(probe).width
        per_worker = settings.WORKER_MAX_CONCURRENT_PROBES
        pairs = [
            (CapUse("provider", provider.pk, provider.name, provider.max_concurrency), width),
            (CapUse("region", probe.region, probe.region, per_worker), 1),
        ]
        for blank, units in pairs:
            use = uses.setdefault((blank.kind, blank.ident), blank)
            use.need_per_hour_s += units * item.busy_s * 3600 / probe.interval_s
            use.probes += 1
            use.sources.add(item.source)
    return sorted(uses.values(), key=lambda use: -use.share)


def provider_shares(provider_ids: Iterable[int]) -> dict[int, CapUse]:
    """Each provider's use of its own cap (the admin's list and page)."""
    probes = (
        Probe.objects.active()
        .filter(endpoint__provider_id__in=list(provider_ids))
        .select_related("endpoint__provider", "workload")
    )
    return {use.ident: use for use in capacity_plan(probes) if use.kind == "provider"}
