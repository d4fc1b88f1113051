"""Server time of the leaderboard and history pages against a big synthetic history.

    .venv/bin/python tests/benchmarks/bench_pages.py [--db inferwatch_bench] [--generate 972000]

Uses the database named by --db (default inferwatch_bench, filled by the scheduling
benchmark's `generate_history --runs 10000000`). With --generate N the script fills (or
finishes filling) the database itself with `generate_history` (300 probes, 90 days by
default), so it can run on any machine; pick N so that one run per probe comes at an
interval dividing a day (972000 → every 2400 s). Server time is the time
Django takes to answer through its full middleware stack (test client, no network).
Target: leaderboard and history pages ≤ 150 ms. Not a timed test: prints figures and
their ratio to a trivial page measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

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
    endpoint = Endpoint.objects.filter(runs__isnull=False).first() or Endpoint.objects.first()
    model = CanonicalModel.objects.filter(endpoints=endpoint).first()
    workload = Workload.objects.filter(probes__endpoint=endpoint).first()
    print(
        f"Database {args.db}: ~{approx_runs:,} runs, {Endpoint.objects.count()} endpoints; "
        f"{args.repeat} requests per page after a first (cold) one."
    )

    pages = {
        "baseline: methodology (no data)": "/methodology/",
        "leaderboard 72h, all models": "/",
        "leaderboard 72h, one model": f"/?model={model.slug}",
        "leaderboard 24h, all models": "/?window=24h",
        "leaderboard 7d, all models": "/?window=7d",
        "leaderboard 30d, all models": "/?window=30d",
        "leaderboard table swap (htmx) 72h": "/?sort=ttft_ms",
        "endpoint history 7d": f"/endpoints/{endpoint.pk}/",
        "endpoint history 30d": f"/endpoints/{endpoint.pk}/?window=30d",
        "endpoint history 90d": f"/endpoints/{endpoint.pk}/?window=90d&workload={workload.slug}",
        "model history 7d": f"/models/{model.slug}/",
        "model history 90d": f"/models/{model.slug}/?window=90d",
        "api leaderboard 72h": "/api/v1/leaderboard",
        "api series 90d": f"/api/v1/series?endpoint={endpoint.pk}&window=90d",
        "api runs (50)": "/api/v1/runs",
        "/metrics": "/metrics",
    }
    client = Client(HTTP_HOST="localhost")
    baseline = None
    print(f"{'page':40} {'first ms':>9} {'median ms':>10} {'p95 ms':>8} {'× baseline':>11}  status")
    for name, url in pages.items():
        headers = {"HX-Request": "true"} if "htmx" in name else {}
        t0 = time.perf_counter()
        status = client.get(url, headers=headers).status_code
        first = (time.perf_counter() - t0) * 1000  # cold: rollup memo empty for this page
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            client.get(url, headers=headers)
            times.append((time.perf_counter() - t0) * 1000)
        median = statistics.median(times)
        p95 = sorted(times)[max(0, round(0.95 * len(times)) - 1)]
        baseline = baseline or median
        mark = "" if name.startswith("baseline") or median <= 150 else "  > 150 ms"
        print(
            f"{name:40} {first:9.1f} {median:10.1f} {p95:8.1f} {median / baseline:11.1f}"
            f"  {status}{mark}"
        )


def _create_database(host: str, name: str) -> None:
    import psycopg

    with psycopg.connect(f"postgresql://{host}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
