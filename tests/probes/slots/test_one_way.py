"""A slot's path is one way: plan -> caps -> measure -> judge -> record.

Real slots (single, parallel, sweep) run against the local simulator under
sys.setprofile, which sees every Python function call. Each call into a probes module
(the engine, the models and the simulator are below every stage and not counted) is
logged with the stages on the stack at that moment (probes.slots.STAGES). The path holds
when: every stage is entered, in order, at most six of them; a stage once left is never
entered again (one contiguous stretch); and no stage is ever called from a stage after
it (the stages on any stack run in order: nothing calls back up). What the stages call
below them (the kinds, prompts, the recorder, Redis) may be entered from any of them.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

import pytest

from probes.models import Workload
from probes.slots import STAGES
from probes.slots import run as runner
from tests.probes.slots.test_workload_groups import probe_for, runs_of, suite_workload

SLOT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
NOT_COUNTED = ("probes.engine", "probes.models", "probes.simulator")
pytestmark = pytest.mark.django_db(transaction=True)

Event = tuple[str, tuple[str, ...]]  # (module entered, the stages on the stack)


def traced(call) -> list[Event]:
    """The probes modules ``call`` enters, in order, each with the stages under it."""
    events: list[Event] = []

    def profile(frame, event, arg):
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("probes.") or module.startswith(NOT_COUNTED):
            return
        stages = []
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if name in STAGES:
                stages.append(name)
            frame = frame.f_back
        events.append((module, tuple(reversed(stages))))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return events


def path_problems(events: list[Event]) -> list[str]:
    """What breaks the one-way path in a trace (empty: it holds)."""
    problems = []
    order = {stage: i for i, stage in enumerate(STAGES)}
    entered: list[str] = []
    left: set[str] = set()
    on_stack: set[str] = set()
    for n, (module, stages) in enumerate(events):
        if module.startswith("probes.slots.") and module not in STAGES:
            problems.append(f"event {n}: {module} is in the slot's package but is no stage")
        ranks = [order[s] for s in stages]
        if ranks != sorted(ranks):
            problems.append(f"event {n}: {module} entered with stages {stages}: a call back up")
        now = set(stages)
        left |= on_stack - now
        for stage in now - on_stack:
            if stage in left:
                problems.append(f"event {n}: {stage} entered again after it was left")
            if stage not in entered:
                entered.append(stage)
        on_stack = now
    if entered != sorted(entered, key=order.__getitem__):
        problems.append(f"stages entered out of order: {entered}")
    if len(entered) > 6:
        problems.append(f"{len(entered)} stages on the way: {entered}")
    return problems


def sweep_workload() -> Workload:
    return suite_workload("standard-1k", kind="sweep", requests=4, max_tokens=40,
                          target_output_tokens=40, params={"ladder": [1, 2, 4]})  # fmt: skip


@pytest.mark.parametrize(
    ("name", "new_workload", "rows"),
    [
        ("single", lambda: suite_workload("chat-short", max_tokens=40), 1),
        ("parallel", lambda: suite_workload("parallel-8", requests=3, max_tokens=40), 5),
        ("sweep", sweep_workload, 8),
    ],
)
def test_a_slot_goes_plan_caps_measure_judge_record_once_each(make_probe, name, new_workload, rows):
    probe = probe_for(make_probe, new_workload(), model="sim-fast@tps=400,ttft=20")
    provider = probe.endpoint.provider
    provider.max_concurrency = 4
    provider.save()

    events = traced(lambda: runner.run_slot(probe, SLOT, "w1", "local"))

    assert len(runs_of(probe)) == rows  # a real slot: measured and recorded
    entered = list(dict.fromkeys(s for _, stages in events for s in stages))
    assert entered == list(STAGES), entered  # all six, in order
    modules = sorted({module for module, _ in events})
    assert path_problems(events) == [], modules
    # The stages passed their values down: what they called is below them, never a stage.
    assert {"probes.kinds.base", "probes.recording.recorder"} <= set(modules), modules


def test_the_path_check_finds_a_return_a_call_up_and_a_stage_too_many():
    run, plan, caps, measure, judge, record = STAGES
    one_way = [
        (run, (run,)),
        (plan, (run, plan)),
        ("probes.kinds.sweep", (run, plan)),
        (caps, (run, caps)),
        (measure, (run, caps, measure)),
        ("probes.prompts", (run, caps, measure)),
        (measure, (run, caps, measure)),  # its own callback, handed to a kind below it
        (judge, (run, caps, judge)),
        ("probes.kinds.sweep", (run, caps, judge)),
        (record, (run, caps, record)),
        (caps, (run, caps)),  # the caps let go: never left in between
    ]
    assert path_problems(one_way) == []

    returned = [*one_way[:5], (plan, (run, plan)), *one_way[5:]]
    assert any("entered again" in p for p in path_problems(returned))
    called_up = [*one_way[:5], (run, (run, caps, measure, run)), *one_way[5:]]
    assert any("call back up" in p for p in path_problems(called_up))
    helper = [*one_way[:5], ("probes.slots.helpers", (run, caps, measure)), *one_way[5:]]
    assert any("no stage" in p for p in path_problems(helper))
    backwards = [(run, (run,)), (judge, (run, judge)), (measure, (run, measure))]
    assert any("out of order" in p for p in path_problems(backwards))
