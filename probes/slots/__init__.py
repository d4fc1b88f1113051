"""A probe's slot, one way: plan -> take caps -> measure -> judge -> record.

| stage   | module                      | reads           | passes on            |
| ------- | --------------------------- | --------------- | -------------------- |
| plan    | probes/slots/plan.py        | the probe, slot | SlotPlan             |
| caps    | probes/scheduling/caps.py   | its footprint   | (holds, then calls   |
|         |                             |                 |  the stages below)   |
| measure | probes/slots/measure.py     | SlotPlan        | Measurement          |
| judge   | probes/slots/judge.py       | Measurement     | Judged               |
| record  | probes/slots/record.py      | Judged          | SlotOutcome          |

probes/slots/run.py (``run_slot``) calls plan, then hands the plan to the caps, which
hold the slot's caps while they call measure, judge and record in turn. Each stage is
entered once per slot and calls only what lies below it: the workload kinds
(probes/kinds/), the engine, the models, the recorder (probes/recording/recorder.py). A test runs
real slots under a profiler to hold this (tests/probes/slots/test_one_way.py).
"""

# The stages in order, by module: what the one-way test checks.
STAGES = (
    "probes.slots.run",
    "probes.slots.plan",
    "probes.scheduling.caps",
    "probes.slots.measure",
    "probes.slots.judge",
    "probes.slots.record",
)
