"""The planner plans a slot with the footprint the slot takes: one figure, from its kind.

A scheduled sweep was planned as one stream for as many rounds as its requests, while
its slot held its widest step's streams for as many rounds as its ladder has steps: the
planner under-estimated it. Real Postgres, Redis and the simulator; the caps the slot
takes are watched on their way to Redis.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from probes import kinds
from probes.scheduling import capacity, caps, planner
from probes.slots import run as runner
from tests.probes.slots.test_workload_groups import probe_for, runs_of, suite_workload

SLOT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db(transaction=True)


def sweep_probe(make_probe, cap: int):
    ladder = {"ladder": [1, 2, 4, 8, 16]}
    workload = suite_workload("standard-1k", kind="sweep", requests=16, max_tokens=30,
                              target_output_tokens=30, params=ladder)  # fmt: skip
    probe = probe_for(make_probe, workload, model="sim-fast@tps=600,ttft=10")
    provider = probe.endpoint.provider
    provider.max_concurrency = cap
    provider.save()
    return probe


def slots_taken(probe, monkeypatch) -> list[tuple[int, int]]:
    taken: list[tuple[int, int]] = []
    real = caps.probe_slots

    def watching(provider, worker, width=1, rounds=1, **kwargs):
        taken.append((width, rounds))
        return real(provider, worker, width, rounds, **kwargs)

    monkeypatch.setattr(caps, "probe_slots", watching)
    runner.run_slot(probe, SLOT, "w1", "local")
    return taken


@pytest.mark.parametrize("cap", [4, 16])
def test_the_planner_plans_a_scheduled_sweep_with_the_footprint_its_slot_takes(
    make_probe, monkeypatch, cap
):
    probe = sweep_probe(make_probe, cap)
    # Before it has data: the estimate the add-endpoint proposal and the planner use.
    (before,) = capacity.busy_of([probe])
    speed = capacity.endpoint_speeds([probe.endpoint])[probe.endpoint_id]
    one_request = capacity.work_of(probe.workload, probe.max_tokens)
    per_request_s = planner.estimate_busy_s(
        planner.Work(one_request.input_tokens, one_request.output_tokens, 1),
        speed.output_tps, speed.prefill_tps, speed.ttft_s,
    )  # fmt: skip

    ((width, rounds),) = slots_taken(probe, monkeypatch)

    ladder = [s for s in (1, 2, 4, 8, 16) if s <= cap]
    assert (width, rounds) == (max(ladder), len(ladder))  # what the slot held
    assert len(runs_of(probe)) == sum(ladder) + 1  # it ran: its steps and its summary
    # The planner: as wide, for as many rounds, before and after the slot has data.
    assert before.load().width == width
    assert before.busy_s == pytest.approx(rounds * per_request_s)
    (after,) = capacity.busy_of([probe])
    assert after.source == "measured" and after.load().width == width
    use = capacity.provider_shares([probe.endpoint.provider_id])[probe.endpoint.provider_id]
    assert use.need_per_hour_s == pytest.approx(width * after.busy_s * 3600 / probe.interval_s)
    assert kinds.footprint(probe.workload, cap) == kinds.Footprint(width, rounds)


def test_every_kind_plans_what_its_slot_takes(make_probe, monkeypatch):
    """The other kinds through the same door: a cached pair, a loop, a parallel batch."""
    for slug, changes, expected in [
        ("cached-10k", {"approx_input_tokens": 300, "max_tokens": 30}, (1, 2)),
        ("agent-loop", {"requests": 3, "max_tokens": 30}, (1, 3)),
        ("parallel-8", {"requests": 3, "max_tokens": 30}, (3, 2)),
    ]:
        probe = probe_for(make_probe, suite_workload(slug, **changes))
        probe.endpoint.provider.max_concurrency = 4
        probe.endpoint.provider.save()
        taken = slots_taken(probe, monkeypatch)
        monkeypatch.undo()
        assert taken == [expected], slug
        (busy,) = capacity.busy_of([probe])
        assert busy.load().width == expected[0], slug
