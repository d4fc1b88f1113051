"""Server time of the leaderboard and history pages against a big synthetic history.

    .venv/bin/python tests/benchmarks/bench_pages.py [--db inferwatch_bench] [--generate 972000]
        [--concurrent 20 --seconds 30]

Uses the database named by --db (default inferwatch_bench, filled by the scheduling
benchmark's `generate_history --runs 10000000`). With --generate N the script fills (or
finishes filling) the database itself with `generate_history` (300 probes, 90 days by
default), so it can run on any machine; pick N so that one run per probe comes at an
interval dividing a day (972000 → every 2400 s). Server time is the time
Django takes to answer through its full middleware stack (test client, no network).
Target: leaderboard and history pages ≤ 150 ms. Not a timed test: prints figures, cold
(the per-process rollup memo cleared before each request) and warm. The clock is set to
the end of the synthetic history; window snapshots are built for that moment as the
maintenance task would (--no-snapshots: pages read rollups alone).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import timedelta
from functools import partial
from pathlib import Path
from unittest.mock import patch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default="inferwatch_bench")
    parser.add_argument("--host", default="postgres@127.0.0.1:5432")
    parser.add_argument(
        "--generate",
        type=int,
        default=None,
        help="runs to generate (resumes an interrupted generation); e.g. 972000",
    )
    parser.add_argument("--probes", type=int, default=300)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--no-snapshots",
        action="store_true",
        help="forget the window snapshots: pages read rollups (as in the minute after the "
        "hour turns)",
    )
    parser.add_argument(
        "--concurrent",
        type=int,
        default=0,
        help="then N visitors at once against gunicorn as `make run` starts it (e.g. 20)",
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="how long they visit")
    args = parser.parse_args()

    os.environ["DATABASE_URL"] = f"postgresql://{args.host}/{args.db}"
    # The test profile serves static names unhashed (no collectstatic needed); DEBUG is off.
    os.environ.setdefault("INFERWATCH_ENV", "test")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from dashboard import snapshots
    from dashboard.models import SnapshotBuild
    from dashboard.queries import aggregates
    from probes.models import CanonicalModel, Endpoint, ProbeRun, Workload

    _create_database(args.host, args.db)
    call_command("migrate", verbosity=0)
    if args.generate:
        print(f"Generating {args.generate:,} runs into {args.db} …", flush=True)
        call_command("generate_history", runs=args.generate, probes=args.probes, days=args.days)
    if not ProbeRun.objects.exists():
        sys.exit(f"{args.db} holds no runs: pass --generate 972000 (or run generate_history).")
    with connection.cursor() as cursor:
        # Fresh statistics, as autovacuum keeps them on a live database.
        cursor.execute("ANALYZE probes_proberun, dashboard_runrollup")
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'probes_proberun'")
        (approx_runs,) = cursor.fetchone()
    # The synthetic history's own workload, model and end: the pages as they would be
    # answered the moment its last run landed (a history generated days ago would
    # otherwise leave the short windows empty), whatever else the database holds.
    workload = (
        Workload.objects.filter(slug__startswith="syn-", probes__isnull=False)
        .order_by("slug")
        .first()
    )
    endpoint = Endpoint.objects.filter(probes__workload=workload).order_by("pk").first()
    model = CanonicalModel.objects.filter(endpoints=endpoint).first()
    last = (
        ProbeRun.objects.filter(workload=workload)
        .order_by("-started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    now = last + timedelta(minutes=5)
    patch("django.utils.timezone.now", lambda: now).start()
    if not args.no_snapshots:
        t0 = time.perf_counter()
        built = snapshots.refresh(now)  # as the maintenance task keeps them
        print(f"Window snapshots {built} built in {(time.perf_counter() - t0):.1f} s")
    else:
        SnapshotBuild.objects.all().delete()
    print(
        f"Database {args.db}: ~{approx_runs:,} runs, {Endpoint.objects.count()} endpoints, "
        f"workload {workload.slug}, now={now:%Y-%m-%d %H:%M}; per page {args.repeat} "
        "requests cold (rollup memo cleared before each) and as many warm."
    )

    pages = {
        "baseline: methodology (no data)": "/methodology/",
        "leaderboard 72h, all models": f"/?workload={workload.slug}",
        "leaderboard 72h, one model": f"/?workload={workload.slug}&model={model.slug}",
        "leaderboard 24h, all models": f"/?workload={workload.slug}&window=24h",
        "leaderboard 7d, all models": f"/?workload={workload.slug}&window=7d",
        "leaderboard 30d, all models": f"/?workload={workload.slug}&window=30d",
        "leaderboard table swap (htmx) 72h": f"/?workload={workload.slug}&sort=ttft_ms",
        "endpoint history 72h (default)": f"/endpoints/{endpoint.pk}/",
        "endpoint history 30d": f"/endpoints/{endpoint.pk}/?window=30d",
        "endpoint history 90d": f"/endpoints/{endpoint.pk}/?window=90d&workload={workload.slug}",
        "model history 72h (default)": f"/models/{model.slug}/",
        "model history 90d": f"/models/{model.slug}/?window=90d",
        "api leaderboard 72h": f"/api/v1/leaderboard?workload={workload.slug}",
        "api series 90d": f"/api/v1/series?endpoint={endpoint.pk}&window=90d",
        "api runs (50)": "/api/v1/runs",
        "/metrics": "/metrics",
    }
    client = Client(HTTP_HOST="localhost")
    print(f"{'page':40} {'cold ms':>8} {'cold p95':>9} {'warm ms':>8} {'warm p95':>9}  status")
    for name, url in pages.items():
        headers = {"HX-Request": "true"} if "htmx" in name else {}
        status = client.get(url, headers=headers).status_code
        request = partial(client.get, url, headers=headers)
        cold = _times(request, args.repeat, aggregates.clear_memo)
        warm = _times(request, args.repeat)
        slow = "" if name.startswith("baseline") or statistics.median(cold) <= 150 else "  > 150"
        print(
            f"{name:40} {statistics.median(cold):8.1f} {_p95(cold):9.1f} "
            f"{statistics.median(warm):8.1f} {_p95(warm):9.1f}  {status}{slow}"
        )
    if args.concurrent:
        # gunicorn's processes read the real clock: the history should end about now.
        from concurrent_visitors import run as visit

        visit(pages, os.environ["DATABASE_URL"], args.concurrent, args.seconds)


def _times(request, repeat: int, before=None) -> list[float]:
    times = []
    for _ in range(repeat):
        if before:
            before()
        t0 = time.perf_counter()
        request()
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _p95(times: list[float]) -> float:
    return sorted(times)[max(0, round(0.95 * len(times)) - 1)]


def _create_database(host: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"postgresql://{host}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
