"""Scale benchmark: page queries over a year of runs, and the dispatcher at 1,000 probes.

    .venv/bin/python tests/benchmarks/bench_scale.py                # everything
    .venv/bin/python tests/benchmarks/bench_scale.py --runs 2000000 # a smaller history
    .venv/bin/python tests/benchmarks/bench_scale.py --skip-dispatch

Uses its own database (BENCH_DATABASE_URL, default
postgresql://postgres@127.0.0.1:5432/inferwatch_bench), created and migrated if absent.
The synthetic history (`generate_history`) is generated there once; an interrupted
generation resumes on the next run. Prints timings side by side, rollups vs raw runs;
never asserts (benchmarks are not timed tests).

Targets (issue 4): leaderboard ≤ 100 ms and a 90-day series ≤ 150 ms at 10 M runs, and
1,000 enabled probes started on time (median delay < 2 s) by one worker.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
BENCH_URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/inferwatch_bench"
)
os.environ["DATABASE_URL"] = BENCH_URL
# A Redis DB of its own, so the benchmark's queue never meets a running deployment's.
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/5")
os.environ.setdefault("INFERWATCH_ENV", "development")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")


def ensure_database() -> None:
    import psycopg

    base, name = BENCH_URL.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    """Median wall time in ms over `repeat` runs (after one warm-up), and the last result."""
    result = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), result


def row(
    label: str, rollup_ms: float, raw_ms: float | None, target_ms: float, source: str = "rollups"
) -> None:
    verdict = "meets" if rollup_ms <= target_ms else "MISSES"
    raw = f"raw {raw_ms:9.1f} ms   ×{raw_ms / rollup_ms:6.1f}" if raw_ms else f"{'':25}"
    print(
        f"  {label:<30} {source:>8} {rollup_ms:8.1f} ms   {raw}   "
        f"target ≤ {target_ms:.0f} ms: {verdict}"
    )


RAW_LEADERBOARD_SQL = """
SELECT endpoint_id, count(*), count(*) FILTER (WHERE status = 'ok'),
       percentile_cont(ARRAY[0.05, 0.25, 0.5, 0.75, 0.95]) WITHIN GROUP (ORDER BY ttft_ms)
           FILTER (WHERE status = 'ok'),
       percentile_cont(ARRAY[0.05, 0.25, 0.5, 0.75, 0.95]) WITHIN GROUP (ORDER BY output_tps)
           FILTER (WHERE status = 'ok' AND NOT short_output),
       percentile_cont(ARRAY[0.05, 0.25, 0.5, 0.75, 0.95]) WITHIN GROUP (ORDER BY e2e_ms)
           FILTER (WHERE status = 'ok')
  FROM probes_proberun
 WHERE workload_id = %s AND started_at >= %s AND started_at <= %s
 GROUP BY endpoint_id
"""

RAW_SERIES_SQL = """
SELECT date_trunc('day', started_at, 'UTC') AS day, count(*),
       count(*) FILTER (WHERE status = 'ok'),
       percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY ttft_ms)
           FILTER (WHERE status = 'ok'),
       percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (ORDER BY output_tps)
           FILTER (WHERE status = 'ok' AND NOT short_output)
  FROM probes_proberun
 WHERE endpoint_id = %s AND workload_id = %s AND started_at >= %s AND started_at <= %s
 GROUP BY 1 ORDER BY 1
"""


def bench_queries() -> None:
    from django.db import connection

    from dashboard import snapshots
    from dashboard.models import SnapshotBuild
    from probes.models import ProbeRun, Workload

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE probes_proberun; ANALYZE dashboard_runrollup;")
        cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = 'probes_proberun'")
        approx_runs = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM dashboard_runrollup")
        rollup_rows = cursor.fetchone()[0]
    workload = Workload.objects.get(slug="syn-chat-medium")
    # "Now" is the end of the synthetic history (not of the dispatcher benchmark's runs).
    last = (
        ProbeRun.objects.filter(workload=workload)
        .order_by("-started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    now = last + timedelta(minutes=5)
    print(f"\nQueries over ~{approx_runs:,} raw runs, {rollup_rows:,} rollup rows, now={now}")
    # First the rollups alone (no snapshot: what a page reads in the minute after the
    # hour turns, or after a late run), then the window snapshots the maintenance task
    # keeps (what a page reads the rest of the time).
    SnapshotBuild.objects.all().delete()
    print("\n  From rollups (no window snapshot), cold: memo cleared before each call")
    _bench_leaderboard_and_series(workload, now, raw=True)
    print("\n  Window snapshots, built as the maintenance task builds them:")
    for window in snapshots.windows(now):
        t0 = time.perf_counter()
        rows = snapshots.build(window, now)
        print(f"    {window:>4}: {rows} rows in {(time.perf_counter() - t0) * 1000:6.0f} ms")
    print("\n  From window snapshots, cold: memo cleared before each call")
    _bench_leaderboard_and_series(workload, now, raw=False)


def _bench_leaderboard_and_series(workload, now, raw: bool) -> None:
    from django.db import connection

    from dashboard.queries import aggregates, history
    from dashboard.queries import filters as query_filters
    from dashboard.queries import leaderboard as leaderboards
    from probes.models import Endpoint

    def leaderboard(window: str):
        def run():
            aggregates._MEMO.clear()  # cold: no memoised rollups from the previous call
            return leaderboards.leaderboard(
                query_filters.Filters(workload=workload.slug, window=window), now=now
            )

        return run

    def raw_leaderboard(window: str):
        def run():
            with connection.cursor() as cursor:
                start = now - aggregates.LEADERBOARD_WINDOWS[window]
                cursor.execute(RAW_LEADERBOARD_SQL, [workload.pk, start, now])
                return cursor.fetchall()

        return run

    def totals(window: str):
        # The leaderboard's figures alone (one aggregate per endpoint), no sparklines.
        def run():
            aggregates._MEMO.clear()
            start = now - aggregates.LEADERBOARD_WINDOWS[window]
            return aggregates.collect(aggregates.scope_of(None, workload), start, now)

        return run

    for window in ("24h", "72h", "7d", "30d"):
        rollup_ms, _ = timed(totals(window))
        raw_ms = timed(raw_leaderboard(window), repeat=3)[0] if raw else None
        source = "rollups" if raw else "snapshot"
        row(f"leaderboard {window} figures", rollup_ms, raw_ms, 100, source)
        rollup_ms, board = timed(leaderboard(window))
        row(f"  whole page query ({len(board.rows)} rows)", rollup_ms, None, 100, source)
        aggregates._MEMO.clear()
        board = leaderboard(window)()
        warm_ms, _ = timed(lambda w=window: leaderboards.leaderboard(
            query_filters.Filters(workload=workload.slug, window=w), now=now))  # fmt: skip
        print(f"  {'':28} (warm, rollup reads memoised: {warm_ms:.1f} ms)")

    endpoint = Endpoint.objects.filter(probes__workload=workload).first()

    def series():
        aggregates._MEMO.clear()
        return history.history([endpoint], window="90d", workload=workload, now=now)

    def raw_series():
        with connection.cursor() as cursor:
            cursor.execute(
                RAW_SERIES_SQL, [endpoint.pk, workload.pk, now - timedelta(days=90), now]
            )
            return cursor.fetchall()

    rollup_ms, hist = timed(series)
    raw_ms = timed(raw_series, repeat=3)[0] if raw else None
    points = len(hist[0].series["output_tps"])
    row(f"90-day series ({points} points)", rollup_ms, raw_ms, 150)


def bench_dispatcher(probes: int, interval_s: int, duration_s: float) -> None:
    """1,000 probes at the simulator, one worker, beat's tick every DISPATCH_INTERVAL_S."""
    from django.conf import settings
    from django.db import connection

    from probes.models import CanonicalModel, Endpoint, Price, Probe, ProbeRun, Provider
    from probes.models import Workload as WorkloadRow
    from probes.simulator import start_in_process
    from probes.tasks import dispatch_due_probes

    print(f"\nDispatcher: {probes} probes every {interval_s} s, one worker, {duration_s:.0f} s")
    with start_in_process() as sim:
        provider, _ = Provider.objects.update_or_create(
            slug="bench-dispatch",
            defaults={
                "name": "Bench dispatch",
                "base_url": sim.base_url,
                "requires_key": False,
                "enabled": True,
                "simulated": True,
                "max_concurrency": 64,
            },
        )
        model, _ = CanonicalModel.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
        workload, _ = WorkloadRow.objects.get_or_create(
            slug="bench-tiny",
            defaults={"name": "Bench tiny", "messages": [{"role": "user", "content": "hi"}]},
        )
        WorkloadRow.objects.filter(pk=workload.pk).update(max_tokens=8)
        Probe.objects.filter(endpoint__provider=provider).delete()
        ProbeRun.objects.filter(endpoint__provider=provider).delete()
        # Slots are placed once the worker answers (below): a worker still booting when
        # the first slots fall due would count its start-up as probe delay.
        parked = datetime.now(UTC) + timedelta(days=1)
        for i in range(probes):
            endpoint, created = Endpoint.objects.get_or_create(
                provider=provider,
                model_id=f"sim-blazing@ttft=20,seed={i}",
                defaults={"canonical_model": model},
            )
            if created:
                Price.objects.create(
                    endpoint=endpoint,
                    effective_from=date(2020, 1, 1),
                    input_per_m=Decimal("0.1"),
                    output_per_m=Decimal("0.2"),
                )
            Probe.objects.create(
                endpoint=endpoint,
                workload=workload,
                region="bench",
                interval_s=interval_s,
                jitter_s=0,
                next_run_at=parked,
            )
        env = os.environ | {
            "DATABASE_URL": BENCH_URL,
            "PROBE_REGION": "bench",
            "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        }
        log = open("/tmp/bench_scale_worker.log", "w")  # noqa: SIM115
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-n", "bench@%h",
             "-Q", "probes.bench", "-c", str(settings.WORKER_MAX_CONCURRENT_PROBES),
             "--without-gossip", "--without-mingle", "-l", "WARNING"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            booted = _wait_for_worker("bench@", timeout_s=120)
            print(f"  worker answered after {booted:.1f} s")
            start = datetime.now(UTC) + timedelta(seconds=2)
            bench_probes = list(Probe.objects.filter(endpoint__provider=provider).order_by("pk"))
            for i, probe in enumerate(bench_probes):
                probe.next_run_at = start + timedelta(seconds=interval_s * i / probes)
            Probe.objects.bulk_update(bench_probes, ["next_run_at"], batch_size=500)
            deadline = time.monotonic() + duration_s + 10
            while time.monotonic() < deadline:  # beat's role, in this process
                dispatch_due_probes()
                connection.close()
                time.sleep(settings.DISPATCH_INTERVAL_S)
            loop_end = datetime.now(UTC)
            time.sleep(5)
        finally:
            worker.terminate()
            worker.wait(timeout=30)
            log.close()
        runs = list(
            ProbeRun.objects.filter(endpoint__provider=provider).values_list(
                "slot_at", "started_at", "status"
            )
        )
        delays = sorted((started - slot).total_seconds() for slot, started, _ in runs)
        loop_s = (loop_end - start).total_seconds()
        expected = sum(
            int((loop_s - interval_s * i / probes) // interval_s) + 1
            for i in range(probes)
            if interval_s * i / probes <= loop_s
        )
        ok = sum(1 for *_, status in runs if status == "ok")
        if not delays:
            print("  no runs recorded: see /tmp/bench_scale_worker.log")
            return
        median = statistics.median(delays)
        p95 = delays[int(0.95 * (len(delays) - 1))]
        verdict = "meets" if median < 2 else "MISSES"
        print(
            f"  runs {len(runs)} of {expected} slots due ({ok} ok); start delay "
            f"median {median:.2f} s, p95 {p95:.2f} s, max {delays[-1]:.2f} s; "
            f"target median < 2 s: {verdict}"
        )
        # Leave the synthetic history as we found it: a thousand extra endpoints and
        # probes would otherwise become the pages' default workload and biggest model.
        ProbeRun.objects.filter(endpoint__provider=provider).delete()
        Probe.objects.filter(endpoint__provider=provider).delete()
        Endpoint.objects.filter(provider=provider).delete()


def _wait_for_worker(name_prefix: str, timeout_s: float) -> float:
    """Seconds until a worker whose name starts with `name_prefix` answers a ping."""
    from dashboard.celery import app

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        replies = app.control.ping(timeout=1.0) or []
        if any(name.startswith(name_prefix) for reply in replies for name in reply):
            return time.monotonic() - t0
    raise SystemExit(f"No worker {name_prefix}… answered within {timeout_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10_000_000)
    parser.add_argument("--probes", type=int, default=300)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--skip-generate", action="store_true")
    parser.add_argument("--skip-queries", action="store_true")
    parser.add_argument("--skip-dispatch", action="store_true")
    parser.add_argument("--dispatch-probes", type=int, default=1000)
    parser.add_argument("--dispatch-interval", type=int, default=120)
    parser.add_argument("--dispatch-seconds", type=float, default=120)
    args = parser.parse_args()

    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if not args.skip_generate:
        call_command(
            "generate_history", runs=args.runs, probes=args.probes, days=args.days
        )  # resumes; a complete history costs a few seconds
    if not args.skip_queries:
        bench_queries()
    if not args.skip_dispatch:
        bench_dispatcher(args.dispatch_probes, args.dispatch_interval, args.dispatch_seconds)


if __name__ == "__main__":
    main()
