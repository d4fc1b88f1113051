"""How long one alert evaluation takes over a realistic raw-run volume.

Run explicitly (not part of the timed suite):
    DATABASE_TEST_NAME=test_iw_alerts INFERWATCH_ENV=test \
        .venv/bin/python -m pytest tests/benchmarks/bench_alerts.py -s -q

Prints the evaluation time beside a baseline measured in the same run: one plain
COUNT(*) of the runs each rule's windows cover.
"""

from __future__ import annotations

import random
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from dashboard.alerts import evaluator
from dashboard.alerts.models import AlertRule
from probes.models import CanonicalModel, Endpoint, ProbeRun, Provider, Workload

ENDPOINTS, WORKLOADS, EVERY_MIN, HOURS = 40, 3, 5, 26


@pytest.mark.django_db
def test_bench_alert_evaluation():
    now = timezone.now()
    model = CanonicalModel.objects.create(name="M", slug="m")
    provider = Provider.objects.create(name="P", slug="p", base_url="http://127.0.0.1:9/v1")
    endpoints = [
        Endpoint.objects.create(provider=provider, model_id=f"m{i}", canonical_model=model)
        for i in range(ENDPOINTS)
    ]
    workloads = [
        Workload.objects.create(slug=f"w{i}", name=f"w{i}", messages=[]) for i in range(WORKLOADS)
    ]
    rnd = random.Random(1)
    rows = [
        ProbeRun(
            endpoint=e,
            workload=w,
            region="local",
            started_at=now - timedelta(minutes=m),
            status="ok" if rnd.random() > 0.03 else "server_error",
            ttft_ms=rnd.lognormvariate(5.3, 0.3),
            output_tps=rnd.lognormvariate(6, 0.2),
            methodology_version="bench",
        )
        for e in endpoints
        for w in workloads
        for m in range(0, HOURS * 60, EVERY_MIN)
    ]
    ProbeRun.objects.bulk_create(rows, batch_size=5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE probes_proberun")
    AlertRule.objects.create(name="ttft all", metric="ttft_ms", regression_pct=50)
    AlertRule.objects.create(name="tps model", metric="output_tps", canonical_model=model)
    AlertRule.objects.create(
        name="avail", metric="success_rate", condition="threshold", threshold=0.9
    )

    start = time.perf_counter()
    for rule in AlertRule.objects.all():
        ProbeRun.objects.filter(
            rule.runs_filter(), started_at__gte=now - timedelta(hours=24, minutes=30)
        ).count()
    baseline_s = time.perf_counter() - start

    start = time.perf_counter()
    summary = evaluator.evaluate_all(now)
    evaluate_s = time.perf_counter() - start

    print(
        f"\n{len(rows):,} runs, {ENDPOINTS * WORKLOADS} series, 3 rules: "
        f"evaluate_all {evaluate_s * 1000:.0f} ms, baseline COUNT {baseline_s * 1000:.0f} ms, "
        f"ratio {evaluate_s / baseline_s:.1f}x; {summary}"
    )
