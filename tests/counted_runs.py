"""Runs that count: measure again when our own loop may have mis-timed a run.

A run is client_bound when the measuring loop was late while it read the stream
(probes/engine/loop_lag.py): a 200-token answer at 4,000 tok/s spans 50 ms, so a loop held
over 1 ms at either end may move its speed past 2 %. On a busy CI machine that happens
to a few runs in a hundred, and such a run is rightly left out of ranks, rollups and
alert samples. A test about those needs runs that count, so it measures the same slot
again; tests of the flag itself (tests/probes/engine/test_loop_lag.py) do not use this.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import timedelta
from typing import TypeVar

from django.db.models import Max

from probes.models import Probe, ProbeRun
from probes.slots import run as runner

T = TypeVar("T")
TRIES = 10


def counted(probe: Probe, measure: Callable[..., T], *args: object) -> T:
    """Call `measure(*args)` (which records runs of `probe`) until none of the runs it
    recorded is client-bound; the mis-timed ones are deleted, so the slot is measured
    again."""
    late: list[ProbeRun] = []
    for _ in range(TRIES):
        before = ProbeRun.objects.filter(probe=probe).aggregate(last=Max("pk"))["last"] or 0
        result = measure(*args)
        new = ProbeRun.objects.filter(probe=probe, pk__gt=before)
        late = [run for run in new if run.client_bound]
        if not late:
            return result
        new.delete()
    lags = [(run.loop_lag_first_ms, run.loop_lag_max_ms) for run in late]
    raise AssertionError(f"{TRIES} tries, each with a client-bound run (first, max lag ms): {lags}")


def run_slot_counted(probe: Probe, slot_at, worker: str = "w1", region: str = "local"):
    """`runner.run_slot`, measured again while our loop mis-timed one of its runs. Each
    try is a slot a second later: a slot's prompts are seeded by its time, and the same
    slot again would meet the provider's prompt cache (a cached pair's cold request would
    come back warm)."""
    tries = itertools.count()

    def one_slot():
        shift = timedelta(seconds=next(tries))
        return runner.run_slot(probe, slot_at and slot_at + shift, worker, region)

    return counted(probe, one_slot)
