"""The capacity planner: phases that keep probes sharing a cap from overlapping, busy-time
estimates, and the plan per provider and region (probes/scheduling/planner.py, capacity.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import combinations

import pytest

from probes.catalog import loader
from probes.models import CanonicalModel, Claim, Endpoint, Probe, ProbeRun, Provider
from probes.onboarding import new_endpoint
from probes.scheduling import capacity, planner

ONE_SLOT = {"one": (1, planner.PROVIDER_WEIGHT)}


def _one_cap(load):
    return [("one", load.width)]


def _windows_overlap(starts: dict, loads: dict, interval: int) -> list:
    """Pairs whose busy windows (start … start + busy + jitter) overlap modulo interval."""
    clashes = []
    for a, b in combinations(starts, 2):
        sa, sb = starts[a] % interval, starts[b] % interval
        wa, wb = loads[a].window_s, loads[b].window_s
        if (sb - sa) % interval < wa or (sa - sb) % interval < wb:
            clashes.append((a, b))
    return clashes


def test_seven_probes_on_one_slot_are_laid_end_to_end_never_in_the_same_second():
    busy = {"agent-loop": 38, "code-refactor": 35, "standard-1k": 18, "chat-short": 6,
            "voice-turn": 3, "json-schema": 9, "tool-call": 5}  # fmt: skip
    loads = {k: planner.Load(k, 300, s, jitter_s=2) for k, s in busy.items()}
    now = 1_700_000_000.4
    starts = planner.place(loads.values(), [], ONE_SLOT, _one_cap, now)

    assert len({int(s) for s in starts.values()}) == 7
    assert all(now < s < now + 300 + 5 for s in starts.values())
    assert _windows_overlap(starts, loads, 300) == []


def test_new_probes_avoid_the_busy_time_of_probes_already_placed():
    now = 1_700_000_000.0
    fixed = planner.Load("old", 60, 20, phase_s=int(now + 10) % planner.CYCLE_S)
    new = [planner.Load(f"n{i}", 60, 10) for i in range(3)]
    starts = planner.place(new, [fixed], ONE_SLOT, _one_cap, now)
    loads = {load.key: load for load in new} | {"old": fixed}
    assert _windows_overlap(starts | {"old": now + 10}, loads, 60) == []


def test_a_plan_that_cannot_fit_still_spreads_starts():
    loads = [planner.Load(i, 60, 30) for i in range(5)]  # 150 s of every 60 s
    starts = planner.place(loads, [], ONE_SLOT, _one_cap, 1_700_000_000.0)
    assert len({int(s) % 60 for s in starts.values()}) == 5


def test_a_wide_parallel_group_counts_its_width_against_the_provider():
    caps = {"p": (8, planner.PROVIDER_WEIGHT)}
    wide = planner.Load("wide", 60, 10, width=8)
    narrow = planner.Load("narrow", 60, 5)
    starts = planner.place([wide, narrow], [], caps, lambda load: [("p", load.width)], 0.0)
    assert _windows_overlap(starts, {"wide": wide, "narrow": narrow}, 60) == []
    assert planner.busy_per_hour_s([wide]) == 8 * 10 * 60


def _seconds_at_once(loads: list[planner.Load], starts: dict) -> int:
    """Seconds of the hour in which two or more of `loads` are busy (jitter included)."""
    profile = planner.Profile.empty(1, 1.0)
    for load in loads:
        profile.add(load, int(starts[load.key]) % planner.CYCLE_S, 1)
    return int((profile.use >= 2).sum())


# The demo's GPU endpoint: five workloads every minute, five every five minutes (a
# parallel group of 8 among them), busy seconds as measured against the simulator.
GPU_DEMO = {
    ("standard-1k", 60): 9.2, ("json-schema", 60): 4.0, ("chat-short", 60): 3.0,
    ("tool-call", 60): 2.2, ("voice-turn", 60): 1.5, ("parallel-8", 300): 10.2,
    ("agent-loop", 300): 24.2, ("code-refactor", 300): 17.8, ("long-10k", 300): 17.2,
    ("cached-10k", 300): 14.3,
}  # fmt: skip


def test_probes_of_one_endpoint_are_laid_apart_even_where_its_provider_takes_them_at_once():
    """Issue 34 item 5: our own probes of one endpoint at once slow each other (the demo's
    code-refactor read 80 % of its claim, alone 100 %). The provider takes 8 at once; the
    endpoint is a cap of one, and the minute's probes go first so the five-minute ones
    fit in the gaps they leave (placed the other way round, 276 s an hour overlapped)."""
    loads = [
        planner.Load(slug, interval, busy, width=8 if slug == "parallel-8" else 1)
        for (slug, interval), busy in GPU_DEMO.items()
    ]
    caps = {"provider": (8, planner.PROVIDER_WEIGHT), "endpoint": (1, planner.ENDPOINT_WEIGHT)}
    starts = planner.place(
        loads, [], caps, lambda load: [("provider", load.width), ("endpoint", 1)], 1_700_000_000.0
    )
    assert _seconds_at_once(loads, starts) == 0


def test_estimate_from_tokens_and_speed():
    one_k = planner.Work(input_tokens=1000, output_tokens=1000, rounds=1)
    # 0.5 s first token + 1000 / (60 × 20) s reading + 1000 / 60 s writing.
    assert planner.estimate_busy_s(one_k, 60) == pytest.approx(0.5 + 0.833 + 16.667, abs=0.01)
    loop = planner.Work(600, 200, rounds=10)
    assert planner.estimate_busy_s(loop, 100, prefill_tps=6000, ttft_s=0.2) == pytest.approx(
        10 * (0.2 + 0.1 + 2.0)
    )
    # Unknown speed: the cautious assumption.
    assert planner.estimate_busy_s(one_k, None) == planner.estimate_busy_s(
        one_k, planner.ASSUMED_OUTPUT_TPS
    )


def test_fitting_interval_is_the_shortest_nice_one_within_the_share():
    assert planner.fitting_interval(115, 1, 300) == 300  # 38 %
    assert planner.fitting_interval(115, 1, 60) == 300  # 60 s: 192 %; 120 s: 96 %
    assert planner.fitting_interval(115, 2, 60) == 120  # two slots: 48 % at 120 s
    assert planner.fitting_interval(10_000, 1, 60) is None


# -- from the database ------------------------------------------------------------------------


@pytest.fixture
def one_slot_server(db):
    return new_endpoint.NewEndpoint(
        provider_name="my llama",
        api_style="openai-chat",
        base_url="http://127.0.0.1:9/v1",
        model_id="llama",
        model_name="Llama",
        max_concurrency=1,
        interval_s=300,
        workloads=[],
    )


def test_add_endpoint_spreads_its_probes_over_the_one_slot(one_slot_server):
    standard = [p.workload for p in new_endpoint.propose(None, 1) if p.fits]
    one_slot_server.workloads = standard
    created = new_endpoint.create(one_slot_server)
    probes = list(Probe.objects.filter(endpoint=created.endpoint).select_related("workload"))
    assert len(probes) >= 7
    starts = {p.pk: p.next_run_at.timestamp() for p in probes}
    assert len({int(s) for s in starts.values()}) == len(probes)
    loads = {b.probe.pk: b.load() for b in capacity.busy_of(probes)}
    if sum(load.window_s for load in loads.values()) <= 300:
        assert _windows_overlap(starts, loads, 300) == []
    now = datetime.now(UTC)
    assert all(now < p.next_run_at < now + timedelta(seconds=310) for p in probes)


def test_busy_time_is_measured_then_claimed_then_assumed(db, one_slot_server):
    one_slot_server.workloads = [p.workload for p in new_endpoint.propose(None, 1)][:1]
    created = new_endpoint.create(one_slot_server)
    probe = Probe.objects.select_related("workload", "endpoint").get(endpoint=created.endpoint)
    assumed = capacity.busy_of([probe])[0]
    assert assumed.source == "assumed"

    endpoint = probe.endpoint
    Claim.objects.create(endpoint=endpoint, metric="output_tps", value=500, source_title="x")
    claimed = capacity.busy_of([probe])[0]
    assert claimed.source == "claimed" and claimed.busy_s < assumed.busy_s

    for i in range(5):
        ProbeRun.objects.create(
            probe=probe, endpoint=endpoint, workload=probe.workload, region="local",
            started_at=datetime.now(UTC) - timedelta(minutes=i), status="ok",
            e2e_ms=4000 + i, output_tps=80,
        )  # fmt: skip
    measured = capacity.busy_of([probe])[0]
    assert measured.source == "measured"
    assert measured.busy_s == pytest.approx(4.002 * probe.workload.rounds)


def test_capacity_plan_per_provider_and_region(db, settings):
    canonical = CanonicalModel.objects.create(name="M", slug="m")
    provider = Provider.objects.create(
        name="Solo", slug="solo", base_url="http://127.0.0.1:9/v1", max_concurrency=1,
        enabled=True, requires_key=False,
    )  # fmt: skip
    endpoint = Endpoint.objects.create(provider=provider, model_id="m", canonical_model=canonical)
    Claim.objects.create(endpoint=endpoint, metric="output_tps", value=60, source_title="x")
    loader.load_workloads(loader.LoadReport())
    workload = new_endpoint.standard_workloads()[0]
    Probe.objects.create(endpoint=endpoint, workload=workload, interval_s=60)
    plan = {use.kind: use for use in capacity.capacity_plan()}
    busy = capacity.estimate(workload, capacity.Speed(60))
    assert plan["provider"].name == "Solo"
    assert plan["provider"].share == pytest.approx(busy / 60)
    per_worker = settings.WORKER_MAX_CONCURRENT_PROBES
    assert plan["region"].limit == per_worker
    assert plan["region"].share == pytest.approx(busy / 60 / per_worker)
    assert "Solo: probes need" in plan["provider"].describe()


def test_load_demo_spreads_each_provider_s_probes(db, settings):
    report = loader.load_demo("local", "http://127.0.0.1:9")
    assert report.created["probes"] >= 30
    for provider in Provider.objects.filter(simulated=True):
        starts = Probe.objects.filter(endpoint__provider=provider).values_list(
            "next_run_at", flat=True
        )
        seconds = [int(s.timestamp()) for s in starts]
        assert len(set(seconds)) == len(seconds), provider.name
    for use in capacity.capacity_plan():
        assert use.share <= planner.WARN_SHARE, use.describe()


def _demo_seconds_at_once() -> list[int]:
    """Per demo endpoint, the seconds of the hour two of its probes are planned at once."""
    probes = Probe.objects.filter(endpoint__provider__simulated=True).select_related(
        "endpoint__provider", "workload"
    )
    by_endpoint: dict[int, list] = {}
    for b in capacity.busy_of(probes):
        by_endpoint.setdefault(b.probe.endpoint_id, []).append(b.load())
    return [
        _seconds_at_once(loads, {load.key: load.phase_s for load in loads})
        for loads in by_endpoint.values()
    ]


def test_load_demo_plans_each_endpoint_s_probes_apart(db):
    """Measured before the fix: the demo's endpoints had two of their own probes running
    at once 876-1,320 s of every hour (10 s of jitter each, no endpoint cap)."""
    loader.load_demo("local", "http://127.0.0.1:9")
    assert set(Probe.objects.values_list("jitter_s", flat=True)) == {0}
    assert _demo_seconds_at_once() == [0, 0, 0, 0]


def test_a_demo_planned_before_is_planned_again_on_its_next_load(db):
    """A demo's probes follow the code: one planned with jitter, all at once, is laid
    apart when `make run` loads the demo again."""
    loader.load_demo("local", "http://127.0.0.1:9")
    Probe.objects.update(jitter_s=10, next_run_at=datetime.now(UTC) + timedelta(seconds=30))
    assert min(_demo_seconds_at_once()) > 0
    loader.load_demo("local", "http://127.0.0.1:9")
    assert set(Probe.objects.values_list("jitter_s", flat=True)) == {0}
    assert _demo_seconds_at_once() == [0, 0, 0, 0]
