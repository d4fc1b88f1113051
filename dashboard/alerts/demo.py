"""The demo's alert rule (`load_catalog --demo`): a TTFT regression on the LPU demo
endpoint, whose simulator profile (sim-fast) is three times slower for 20 minutes every
3 hours, the first time 20 minutes after the simulator starts. So /alerts/ shows a
firing alert within the first hour of `make run`, and a resolved one after it.

Created once, found by name: an operator's edits (or switching it off) are kept.
"""

from __future__ import annotations

from probes.catalog.loader import LoadReport
from probes.models import Endpoint, Workload

from .models import AlertRule

DEMO_RULE = "Demo: LPU TTFT regression"
DEMO_ENDPOINT_PROVIDER = "lpu-demo"
# The headline workload: one series, one alert (not one per workload).
DEMO_WORKLOAD = "standard-1k"


def load_demo_rule(report: LoadReport) -> None:
    endpoint = Endpoint.objects.filter(provider__slug=DEMO_ENDPOINT_PROVIDER).first()
    workload = Workload.objects.filter(slug=DEMO_WORKLOAD).first()
    if endpoint is None or workload is None or AlertRule.objects.filter(name=DEMO_RULE).exists():
        report.add("alert rules", False)
        return
    AlertRule.objects.create(
        name=DEMO_RULE,
        endpoint=endpoint,
        workload=workload,
        metric="ttft_ms",
        condition="regression",
        regression_pct=50,
        # Ten one-minute runs against the hour before them, decided by the default test
        # (the CUSUM): it fires at the third slow run of an episode and resolves a run or
        # two after it ends.
        recent_window_min=10,
        baseline_window_h=1,
        min_samples=5,
        # The first episode starts 20 minutes in: the hour before it holds ~20 runs.
        min_baseline_samples=10,
        notes="Shipped with the demo: the simulated LPU slows down every 3 hours.",
    )
    report.add("alert rules", True)
