"""One /metrics scrape at 100 endpoints × 11 workloads × 3 regions: time and size.

    .venv/bin/python tests/benchmarks/bench_metrics.py [--db inferwatch_bench_metrics]

Builds that many series in its own database (dropped and refilled on every run): a week
of daily rollups per series with all four histograms filled (a worst case: on a real
deployment only reasoning models have a time to first answer token), plus two raw runs
per series in the raw tail, and the lifetime snapshot the maintenance task keeps. Then it
scrapes /metrics through Django's full middleware stack (test client, no network) as
Prometheus does (Accept-Encoding: gzip) and plain, cold (the rollup memo cleared) each
time. Target: ≤ 1 s and ≤ 5 MB per scrape. Not a timed test: prints figures.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

ENDPOINTS, WORKLOADS, REGIONS, DAYS = 100, 11, ("us-east", "eu-west", "ap-south"), 7


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="inferwatch_bench_metrics")
    parser.add_argument("--host", default="postgres@127.0.0.1:5432")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--reuse", action="store_true", help="scrape the database a previous run filled"
    )
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = f"postgresql://{args.host}/{args.db}"
    os.environ.setdefault("INFERWATCH_ENV", "test")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    if not args.reuse:
        _recreate_database(args.host, args.db)
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from dashboard import snapshots
    from dashboard.queries import aggregates
    from probes.models import ProbeRun

    call_command("migrate", verbosity=0)
    if args.reuse:
        # The newest raw runs were written 10 minutes before the filling run's clock.
        newest = ProbeRun.objects.order_by("-started_at").values_list("started_at", flat=True)
        now = newest.first() + timedelta(minutes=10)
    else:
        now = datetime.now(UTC).replace(minute=30, second=0, microsecond=0)
        t0 = time.perf_counter()
        series = _fill(now)
        print(f"{series:,} series filled in {time.perf_counter() - t0:.1f} s")
    patch("django.utils.timezone.now", lambda: now).start()
    if not args.reuse:
        t0 = time.perf_counter()
        snapshots.refresh(now)
        print(f"Snapshots (the lifetime one included) built in {time.perf_counter() - t0:.1f} s")

    client = Client(HTTP_HOST="localhost")
    for label, headers in (("gzip (as Prometheus)", {"Accept-Encoding": "gzip"}), ("plain", {})):
        times, cpu, sizes = [], [], []
        for _ in range(args.repeat):
            aggregates.clear_memo()
            t0, c0 = time.perf_counter(), time.process_time()
            response = client.get("/metrics", headers=headers)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            sizes.append(len(response.content))
            assert response.status_code == 200
        print(
            f"/metrics {label:22} median {statistics.median(times) * 1000:7.0f} ms, "
            f"max {max(times) * 1000:7.0f} ms "
            f"(web process CPU {statistics.median(cpu) * 1000:5.0f} ms), "
            f"{statistics.median(sizes) / 1e6:6.2f} MB"
        )
    body = client.get("/metrics").content
    lines, bucket_lines = body.count(b"\n"), body.count(b"_bucket{")
    print(f"{lines:,} lines, {bucket_lines:,} bucket samples")


def _fill(now: datetime) -> int:
    """The catalog, a week of daily rollups per series and two raw runs each."""
    from decimal import Decimal

    from dashboard import histogram, rollups
    from dashboard.models import RunRollup
    from probes.models import CanonicalModel, Endpoint, Probe, ProbeRun, Provider, Workload

    rng = random.Random(19)
    providers = [
        Provider.objects.create(
            name=f"Provider {p}",
            slug=f"provider-{p}",
            base_url=f"https://provider{p}.example/v1",
            enabled=True,
        )
        for p in range(20)
    ]
    models = [
        CanonicalModel.objects.create(name=f"Model {m} 70B", slug=f"model-{m}-70b")
        for m in range(5)
    ]
    endpoints = [
        Endpoint.objects.create(
            provider=providers[i // 5],
            canonical_model=models[i % 5],
            model_id=f"vendor-{i % 5}/Model-{i % 5}-70B-Instruct-Turbo",
        )
        for i in range(ENDPOINTS)
    ]
    workloads = [
        Workload.objects.create(
            slug=f"workload-{w}",
            name=f"Workload {w}",
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=300,
        )
        for w in range(WORKLOADS)
    ]
    today = now.replace(hour=0, minute=0)
    rows, runs, probes = [], [], []
    for e in endpoints:
        speed, ttft = 10 ** rng.uniform(1.5, 3.4), 10 ** rng.uniform(1.5, 3)
        for w in workloads:
            for region in REGIONS:
                probes.append(Probe(endpoint=e, workload=w, region=region))
                # A day's spread of samples (the same each day: building histograms is
                # the slow part here, and the scrape reads the merged lifetime anyway).
                n = 288  # a run every 5 minutes
                tps = [speed * rng.gauss(1, 0.08) for _ in range(n)]
                ttfts = [ttft * rng.lognormvariate(0, 0.3) for _ in range(n)]
                hists = {
                    "hist_ttft_ms": histogram.build(ttfts),
                    "hist_ttfat_ms": histogram.build(t + 150 for t in ttfts),
                    "hist_e2e_ms": histogram.build(
                        t + 300_000 / s for t, s in zip(ttfts, tps, strict=True)
                    ),
                    "hist_output_tps": histogram.build(tps),
                }
                for day in range(1, DAYS + 1):
                    rows.append(
                        RunRollup(
                            granularity=RunRollup.DAY,
                            bucket_start=today - timedelta(days=day),
                            endpoint=e,
                            workload=w,
                            region=region,
                            runs=n,
                            ok_runs=n,
                            status_counts={"ok": n},
                            sum_output_tokens=300 * n,
                            sum_input_tokens=1000 * n,
                            sum_cost_usd=Decimal("0.0003") * n,
                            **hists,
                        )
                    )
                for minutes in (10, 40):
                    runs.append(
                        ProbeRun(
                            endpoint=e,
                            workload=w,
                            region=region,
                            started_at=now - timedelta(minutes=minutes),
                            status="ok",
                            http_status=200,
                            ttft_ms=ttft,
                            ttfat_ms=ttft + 150,
                            e2e_ms=ttft + 300_000 / speed,
                            output_tps=speed,
                            output_tokens=300,
                            input_tokens=1000,
                            methodology_version="1",
                        )
                    )
        if len(rows) > 20_000:
            RunRollup.objects.bulk_create(rows, batch_size=2000)
            rows = []
    RunRollup.objects.bulk_create(rows, batch_size=2000)
    Probe.objects.bulk_create(probes, batch_size=2000)
    ProbeRun.objects.bulk_create(runs, batch_size=2000)
    rollups.mark_runs_read()
    return len(probes)


def _recreate_database(host: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"postgresql://{host}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
