"""Capacity benchmark: 1,000 probes on one worker, the threads pool beside today's prefork.

    .venv/bin/python tests/benchmarks/bench_capacity.py --quick --json   # ~9 minutes in all
    .venv/bin/python tests/benchmarks/bench_capacity.py --minutes 10     # per pool
    .venv/bin/python tests/benchmarks/bench_capacity.py --quick --pools threads

Real beat, a real worker, real Redis and Postgres, the project's simulator (a child
process, real sockets) serving 100 endpoints x 10 workloads: 1,000 probes every 300 s,
some endpoints single-slot (provider max_concurrency 1), some flaky (10 % of requests
fail). Each pool gets the same two phases, one after the other (never both at once: the
machine has two cores):

- steady: the 1,000 probes for N minutes, phases spread evenly over their interval (the
  spreading the planner does; here by hand so this measures the worker alone);
- burst: 64 probes due at the same second, 16 streams at 2,100 tok/s and 48 at 150
  tok/s, to measure memory per probe in flight and accuracy under that load;
- sweep: one concurrency-sweep slot whose only step is 64 streams at 2,100 tok/s started
  together (~134,000 events/s), the accuracy of a wide group at the machine's limit.

Every slot the plan puts in the steady window is exactly one of done, skipped (by
reason), lost, still open or never dispatched: the table's "accounted" row says whether
they add up to the slots due.

Accuracy is against the simulator's own send times (x_simulator in each stream's usage):
tok/s within 2 %, TTFT within 5 ms of the simulator's first send. The simulator stands in
for a provider's own machines but shares our cores: it runs at the measuring processes'
priority (nice -10, where the kernel allows; --simulator-nice 0 to share ours), so that
its stamp of a request's receipt is not queued behind our worker's 64 task threads — a
late receipt stamp shortens the truth, not our measurement. Own database
(inferwatch_bench_capacity) and Redis DB 6. Prints a table; with --json one JSON object
last. Never asserts: a benchmark is not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
BENCH_URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/inferwatch_bench_capacity"
)
BROKER = os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/6")
os.environ.update(
    DATABASE_URL=BENCH_URL, CELERY_BROKER_URL=BROKER, REDIS_URL=BROKER, PROBE_REGION="bench"
)
os.environ.setdefault("INFERWATCH_ENV", "development")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

from probes.engine.measurer_child import NICE as MEASURER_NICE  # noqa: E402 (after sys.path)

PREFIX = "bench-cap"
INTERVAL_S = 300
ENDPOINTS = 100
SINGLE_SLOT = range(0, 10)  # endpoints whose provider takes one request at a time
FLAKY = range(10, 20)  # endpoints failing 10 % of requests
FAST = range(20, 40)  # 2,100 tok/s; the others 150 tok/s
WORKLOAD_TOKENS = (64, 96, 128, 192, 256, 384, 512, 640, 768, 1024)
BURST_FAST, BURST_SLOW = 16, 48
SWEEP_STREAMS, SWEEP_TOKENS = 64, 20000  # ~9.5 s each at 2,100 tok/s
# Prefork as shipped before the threads pool: WORKER_MAX_CONCURRENT_PROBES defaulted to 4.
BASELINE_CONCURRENCY = 4


def ensure_database() -> None:
    import psycopg

    base, name = BENCH_URL.rsplit("/", 1)
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


# -- fixtures ---------------------------------------------------------------------------


def _provider(slug: str, base_url: str, max_concurrency: int):
    from probes.models import Provider

    provider, _ = Provider.objects.update_or_create(
        slug=slug,
        defaults={
            "name": slug,
            "base_url": base_url,
            "requires_key": False,
            "enabled": True,
            "simulated": True,
            "max_concurrency": max_concurrency,
            "first_token_timeout_s": 10.0,
            "stall_timeout_s": 5.0,
            "total_timeout_s": 30.0,
            "backoff_until": None,
        },
    )
    return provider


def _endpoint(provider, model_id: str):
    from probes.models import CanonicalModel, Endpoint, Price

    model, _ = CanonicalModel.objects.get_or_create(slug=PREFIX, defaults={"name": "Bench"})
    endpoint, created = Endpoint.objects.get_or_create(
        provider=provider, model_id=model_id, defaults={"canonical_model": model}
    )
    if created:
        Price.objects.create(
            endpoint=endpoint,
            effective_from=date(2020, 1, 1),
            input_per_m=Decimal("0.1"),
            output_per_m=Decimal("0.2"),
        )
    return endpoint


def _workload(slug: str, max_tokens: int, **extra):
    from probes.models import Workload

    workload, _ = Workload.objects.update_or_create(
        slug=slug,
        defaults={
            "name": slug,
            "material": "fixed",
            "messages": [{"role": "user", "content": "Count."}],
            "max_tokens": max_tokens,
            **extra,
        },
    )
    return workload


def build_fleet(base_url: str) -> tuple[list, list]:
    """(the 1,000 steady probes, the 64 burst probes, the sweep probe), parked a day ahead."""
    from probes.models import Probe

    parked = datetime.now(UTC) + timedelta(days=1)
    # An earlier run's probes (another fleet, or one interrupted mid-phase) stay quiet.
    Probe.objects.filter(endpoint__provider__slug__startswith=PREFIX).update(
        next_run_at=parked, last_dispatched_at=None
    )
    workloads = [_workload(f"{PREFIX}-{n}", n) for n in WORKLOAD_TOKENS]
    steady = []
    for i in range(ENDPOINTS):
        provider = _provider(f"{PREFIX}-{i}", base_url, 1 if i in SINGLE_SLOT else 8)
        tps = 2100 if i in FAST else 150
        errors = ",errors=0.1" if i in FLAKY else ""
        endpoint = _endpoint(provider, f"bench@tps={tps},ttft=80{errors},seed={i}")
        for workload in workloads:
            probe, _ = Probe.objects.update_or_create(
                endpoint=endpoint,
                workload=workload,
                region="bench",
                defaults={"interval_s": INTERVAL_S, "jitter_s": 0, "next_run_at": parked},
            )
            steady.append(probe)
    burst = []
    provider = _provider(f"{PREFIX}-burst", base_url, BURST_FAST + BURST_SLOW)
    # ~10 s each, so that all 64 are streaming at once however their starts spread.
    long_fast, long_slow = _workload(f"{PREFIX}-20000", 20000), _workload(f"{PREFIX}-1500", 1500)
    for i in range(BURST_FAST + BURST_SLOW):
        fast = i < BURST_FAST
        endpoint = _endpoint(provider, f"bench@tps={2100 if fast else 150},ttft=80,seed={i}")
        probe, _ = Probe.objects.update_or_create(
            endpoint=endpoint,
            workload=long_fast if fast else long_slow,
            region="bench",
            defaults={"interval_s": 3600, "jitter_s": 0, "next_run_at": parked},
        )
        burst.append(probe)
    return steady, burst, [_sweep_probe(base_url, parked)]


def _sweep_probe(base_url: str, parked: datetime):
    """One sweep whose only step is SWEEP_STREAMS streams at 2,100 tok/s at once."""
    from probes.models import Probe

    provider = _provider(f"{PREFIX}-sweep", base_url, SWEEP_STREAMS)
    endpoint = _endpoint(provider, "bench@tps=2100,ttft=80,seed=4242")
    workload = _workload(
        f"{PREFIX}-sweep-{SWEEP_STREAMS}",
        SWEEP_TOKENS,
        kind="sweep",
        requests=SWEEP_STREAMS,
        params={"ladder": [SWEEP_STREAMS]},
    )
    probe, _ = Probe.objects.update_or_create(
        endpoint=endpoint,
        workload=workload,
        region="bench",
        defaults={"interval_s": 3600, "jitter_s": 0, "next_run_at": parked},
    )
    return probe


def reset(probes) -> None:
    from probes.models import DispatchedSlot, ProbeRun
    from probes.platform.redis_client import redis_client

    ids = [p.pk for p in probes]
    ProbeRun.objects.filter(probe_id__in=ids).delete()
    DispatchedSlot.objects.filter(probe_id__in=ids).delete()
    redis_client().flushdb()


def schedule(probes, start: datetime, spread_s: float) -> None:
    """Phases evenly over `spread_s`, an endpoint's probes a tenth of it apart (the fleet
    is built endpoint by endpoint): probes sharing a cap never start together."""
    from probes.models import Probe

    n = len(probes)
    per_endpoint = len(WORKLOAD_TOKENS) if n == ENDPOINTS * len(WORKLOAD_TOKENS) else 1
    for i, probe in enumerate(probes):
        place = (i % per_endpoint) * (n // per_endpoint) + i // per_endpoint
        probe.next_run_at = start + timedelta(seconds=spread_s * place / n)
        # A slot dispatched in an earlier phase would make due_at() count an interval
        # from it: an old slot, skipped as missed, outside the plan (and the accounting).
        probe.last_dispatched_at = None
    Probe.objects.bulk_update(probes, ["next_run_at", "last_dispatched_at"], batch_size=500)


def park(probes) -> None:
    from probes.models import Probe

    Probe.objects.filter(pk__in=[p.pk for p in probes]).update(
        next_run_at=datetime.now(UTC) + timedelta(days=1), last_dispatched_at=None
    )


# -- processes --------------------------------------------------------------------------


def start(name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    log = open(f"/tmp/bench_capacity_{name}.log", "w")  # noqa: SIM115
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "dashboard", *args],
        cwd=ROOT,
        env=os.environ | {"PYTHONUNBUFFERED": "1"} | env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def stop(process: subprocess.Popen, grace_s: float = 40.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def pss_mb(pid: int) -> float:
    """The proportional set size of `pid` and its children, in MB (shared pages split)."""
    total = 0
    for p in [pid, *_children(pid)]:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def wait_for_beat(timeout_s: float = 120) -> None:
    """Until beat's dispatcher has ticked: its start-up must not count as probe delay."""
    from probes.scheduling import heartbeat

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if "dispatcher" in heartbeat.read_heartbeats("beat"):
            return
        time.sleep(0.5)
    raise SystemExit("beat did not tick; see /tmp/bench_capacity_beat_*.log")


def wait_for_worker(timeout_s: float = 120) -> None:
    from dashboard.celery import app

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if any(n.startswith("bench@") for r in app.control.ping(timeout=1.0) or [] for n in r):
            return
    raise SystemExit("the benchmark's worker did not answer; see /tmp/bench_capacity_*.log")


def watch(worker: subprocess.Popen, until: float, done=lambda: False) -> float:
    """Sample the worker's PSS every second until `until` (monotonic) or done(); the max."""
    from django.db import connection

    peak = 0.0
    while time.monotonic() < until and not done():
        peak = max(peak, pss_mb(worker.pid))
        connection.close()
        time.sleep(1.0)
    return peak


# -- figures ----------------------------------------------------------------------------


def _truth(run) -> tuple[float, float] | None:
    """(true TTFT ms from the simulator's receipt, true tok/s) of a run, from x_simulator."""
    sim = (run.usage or {}).get("x_simulator") or (run.server_timing or {}).get("x_simulator")
    if not sim:
        return None
    span = (sim["t_last_ns"] - sim["t_first_ns"]) / 1e9
    if span <= 0:
        return None
    tps = (sim["output_tokens"] - sim["first_event_tokens"]) / span
    return (sim["t_first_ns"] - sim["t_request_ns"]) / 1e6, tps


def accuracy(runs, min_span_s: float = 0.0) -> dict:
    """Shares of ok runs within 2 % of the true tok/s and 5 ms of the true TTFT; only
    streams of at least `min_span_s` (2 % of a 15 ms stream is a scheduler hiccup)."""
    tps_ok = ttft_ok = stamp_ok = n = bound = 0
    misses = []  # (true tok/s, our TTFT error ms, from the headers) past 5 ms: where and how
    for run in runs:
        truth = _truth(run)
        if run.status != "ok" or truth is None or not run.output_tps or run.ttft_ms is None:
            continue
        if (run.output_tokens or 0) / truth[1] < min_span_s:
            continue
        true_ttft, true_tps = truth
        n += 1
        bound += run.client_bound
        stamp_ok += abs(_from_headers_error_ms(run, true_ttft) or 0.0) <= 5.0
        tps_ok += abs(run.output_tps / true_tps - 1) <= 0.02
        ttft_ok += abs(run.ttft_ms - true_ttft) <= 5.0
        if abs(run.ttft_ms - true_ttft) > 5.0:
            from_headers = _from_headers_error_ms(run, true_ttft)
            misses.append(
                (round(true_tps), round(run.ttft_ms - true_ttft, 1), round(from_headers or 0, 1))
            )
    return {
        "measured": n,
        "within_2pct_share": round(tps_ok / n, 4) if n else None,
        "ttft_within_5ms_share": round(ttft_ok / n, 4) if n else None,
        "from_headers_within_5ms_share": round(stamp_ok / n, 4) if n else None,
        "flagged_client_bound": bound,
        "ttft_misses": sorted(misses),
    }


def _from_headers_error_ms(run, true_ttft: float) -> float | None:
    """The TTFT error counted from the response headers: (our TTFT − our time to the
    headers) against the simulator's receipt-to-first-send. The simulator sends its
    headers when its loop reads the request, so this leaves out the simulator's own delay
    in reading requests (which the receipt-based truth counts against us) and keeps our
    stamps' lateness."""
    if run.ttfb_ms is None or run.ttft_ms is None:
        return None
    return (run.ttft_ms - run.ttfb_ms) - true_ttft


def most_at_once(runs) -> int:
    edges = []
    for run in runs:
        if run.e2e_ms is not None:
            end = run.started_at + timedelta(milliseconds=run.e2e_ms)
            edges += [(run.started_at, 1), (end, -1)]
    now = peak = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        now += step
        peak = max(peak, now)
    return peak


def _reason(text: str) -> str:
    return (text.split(":", 1)[0] or "unstated")[:60]


def account(steady, start_at: datetime, end_at: datetime) -> dict:
    """Every slot the plan put in [start_at, end_at], by what became of it: done, skipped
    (by reason), lost, still open, never dispatched; and any ledger row outside the plan."""
    from probes.models import DispatchedSlot

    interval = timedelta(seconds=INTERVAL_S)
    planned = set()
    for probe in steady:
        slot = probe.next_run_at  # as schedule() set it: the probe's first slot
        while slot <= end_at:
            planned.add((probe.pk, slot))
            slot += interval
    rows = DispatchedSlot.objects.filter(
        probe_id__in=[p.pk for p in steady], slot_at__gte=start_at, slot_at__lte=end_at
    ).values_list("probe_id", "slot_at", "state", "reason")
    seen: dict[tuple[int, datetime], tuple[str, str]] = {
        (probe_id, slot_at): (state, reason) for probe_id, slot_at, state, reason in rows
    }
    states: Counter = Counter()
    skipped: Counter = Counter()
    for key in planned:
        state, reason = seen.get(key, ("never dispatched", ""))
        states[state] += 1
        if state == "skipped":
            skipped[_reason(reason)] += 1
    done, lost = states.get("done", 0), states.get("lost", 0)
    still_open = sum(states.get(s, 0) for s in ("queued", "started", "retried"))
    never = states.get("never dispatched", 0)
    total_skipped = sum(skipped.values())
    return {
        "slots_due": len(planned),
        "done": done,
        "skipped": dict(skipped),
        "lost": lost,
        "open_at_end": still_open,
        "not_dispatched": never,
        "outside_plan": len(set(seen) - planned),
        "accounted": (
            f"{len(planned)} = {done} + {total_skipped} + {lost}"
            + (f" (+ {still_open} open + {never} never dispatched)" if still_open or never else "")
            + ("" if len(planned) == done + total_skipped + lost + still_open + never else " ✗")
        ),
    }


def figures(steady, burst, sweep, start_at: datetime, end_at: datetime, pss: float) -> dict:
    from probes.models import ProbeRun

    steady_ids = [p.pk for p in steady]
    runs = list(ProbeRun.objects.filter(probe_id__in=steady_ids, request_index=0))
    lags = sorted((r.started_at - r.slot_at).total_seconds() for r in runs if r.slot_at)
    burst_runs = list(ProbeRun.objects.filter(probe_id__in=[p.pk for p in burst]))
    sweep_runs = list(ProbeRun.objects.filter(probe_id__in=[p.pk for p in sweep], role="step"))
    honest = [r for r in runs if "errors=" not in r.endpoint.model_id]
    peak = max(most_at_once(runs), most_at_once(burst_runs))
    burst_peak = most_at_once(burst_runs)
    burst_accuracy = accuracy(burst_runs)
    return {
        "probes": len(steady),
        **account(steady, start_at, end_at),
        "start_lag_p50_s": round(statistics.median(lags), 3) if lags else None,
        "start_lag_p95_s": round(lags[int(0.95 * (len(lags) - 1))], 3) if lags else None,
        "in_flight_peak": peak,
        # The accuracy target: 64 streams at once (16 at 2,100 tok/s, 48 at 150).
        "within_2pct_share": burst_accuracy["within_2pct_share"],
        "ttft_within_5ms_share": burst_accuracy["ttft_within_5ms_share"],
        "burst": {"in_flight_peak": burst_peak, "runs": len(burst_runs), **burst_accuracy},
        "sweep": {
            "in_flight_peak": most_at_once(sweep_runs),
            "runs": len(sweep_runs),
            **accuracy(sweep_runs),
        },
        "steady_accuracy": accuracy(honest, min_span_s=1.0),
        "client_bound": sum(r.client_bound for r in [*runs, *burst_runs, *sweep_runs]),
        "worker_pss_mb": round(pss, 1),
        "pss_mb_per_probe": round(pss / burst_peak, 1) if burst_peak else None,
    }


# -- one pool ---------------------------------------------------------------------------


def measure_pool(pool: str, concurrency: int, steady, burst, sweep, minutes: float) -> dict:
    from django.db import connection

    from probes.models import ProbeRun

    print(f"\n{pool} pool, concurrency {concurrency}: {len(steady)} probes for {minutes:g} min")
    reset([*steady, *burst, *sweep])
    env = {"WORKER_POOL": pool, "WORKER_MAX_CONCURRENT_PROBES": str(concurrency)}
    worker = start(
        f"worker_{pool}",
        ["worker", "-n", "bench@%h", "-Q", "probes.bench,celery", "-c", str(concurrency),
         "--without-gossip", "--without-mingle", "-l", "WARNING"],
        env,
    )  # fmt: skip
    beat = None
    try:
        wait_for_worker()
        beat = start(f"beat_{pool}", ["beat", "-l", "WARNING", "--pidfile="], env)
        wait_for_beat()
        start_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
        schedule(steady, start_at, INTERVAL_S)
        connection.close()
        watch(worker, time.monotonic() + 3 + minutes * 60)
        end_at = datetime.now(UTC)
        park(steady)
        time.sleep(10)  # the last slots' streams end
        # Burst: 64 due at once; memory sampled while they stream.
        schedule(burst, datetime.now(UTC), 0)
        ids = [p.pk for p in burst]
        pss = watch(
            worker,
            time.monotonic() + 45,
            lambda: ProbeRun.objects.filter(probe_id__in=ids).count() >= len(ids),
        )
        park(burst)
        time.sleep(5)
        # Sweep: one slot, its one step SWEEP_STREAMS streams started together.
        schedule(sweep, datetime.now(UTC), 0)
        ids = [p.pk for p in sweep]
        watch(
            worker,
            time.monotonic() + 90,
            lambda: ProbeRun.objects.filter(probe_id__in=ids, role="group").exists(),
        )
        park(sweep)
    finally:
        if beat is not None:
            stop(beat, 10)
        stop(worker)
    return figures(steady, burst, sweep, start_at, end_at, pss)


ROWS = [
    ("probes", "probes"),
    ("slots_due", "slots due"),
    ("done", "done"),
    ("skipped", "skipped (by reason)"),
    ("lost", "lost"),
    ("open_at_end", "still open at the end"),
    ("not_dispatched", "never dispatched"),
    ("outside_plan", "ledger rows outside the plan"),
    ("accounted", "due = done + skipped + lost"),
    ("start_lag_p50_s", "start lag p50 (s)"),
    ("start_lag_p95_s", "start lag p95 (s)"),
    ("in_flight_peak", "probes in flight, peak"),
    ("burst", "burst of 64 due at once"),
    ("within_2pct_share", "burst: tok/s within 2 %"),
    ("ttft_within_5ms_share", "burst: TTFT within 5 ms"),
    ("sweep", f"sweep step: {SWEEP_STREAMS} × 2,100 tok/s at once"),
    ("steady_accuracy", "steady, streams ≥ 1 s"),
    ("client_bound", "runs flagged client_bound"),
    ("worker_pss_mb", "worker PSS at the burst (MB)"),
    ("pss_mb_per_probe", "PSS per probe in flight (MB)"),
]


def table(pools: dict[str, dict]) -> str:
    def cell(value) -> str:
        if isinstance(value, dict) and "in_flight_peak" in value and "measured" in value:
            return (
                f"{value['in_flight_peak']} at once, {value['runs']} runs: tok/s within 2 % "
                f"{value['within_2pct_share']}, TTFT within 5 ms "
                f"{value['ttft_within_5ms_share']} (from the headers "
                f"{value['from_headers_within_5ms_share']}), client-bound "
                f"{value['flagged_client_bound']}"
            )
        if isinstance(value, dict) and "measured" in value:
            return (
                f"{value['measured']} runs: tok/s within 2 % {value['within_2pct_share']}, "
                f"TTFT within 5 ms {value['ttft_within_5ms_share']}"
            )
        if isinstance(value, dict):
            return ", ".join(f"{k}: {v}" for k, v in value.items()) or "0"
        return str(value)

    heads = {
        "threads": "threads (measuring processes)",
        "prefork": f"prefork ×{BASELINE_CONCURRENCY} (baseline)",
    }
    lines = ["| | " + " | ".join(heads[p] for p in pools) + " |"]
    lines.append("|---" * (len(pools) + 1) + "|")
    for key, label in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(f[key]) for f in pools.values()) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2.5 minutes per pool (~9 min in all)")
    parser.add_argument("--minutes", type=float, default=10.0, help="steady phase, per pool")
    parser.add_argument("--concurrency", type=int, default=64, help="the threads pool's size")
    parser.add_argument("--json", action="store_true", help="one JSON object last")
    parser.add_argument(
        "--pools", default="threads,prefork", help="which pools to run, in order (comma list)"
    )
    parser.add_argument(
        "--simulator-nice",
        type=int,
        default=MEASURER_NICE,
        help="the simulator's priority change (default: the measuring processes')",
    )
    args = parser.parse_args()
    minutes = 2.5 if args.quick else args.minutes

    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command

    from probes.simulator import start_in_process

    call_command("migrate", verbosity=0)
    sizes = {"threads": args.concurrency, "prefork": BASELINE_CONCURRENCY}
    chosen = [p.strip() for p in args.pools.split(",") if p.strip()]
    if not chosen or set(chosen) - set(sizes):
        raise SystemExit("--pools: threads, prefork or both (comma-separated)")
    results: dict[str, dict] = {}
    with start_in_process(nice=args.simulator_nice) as sim:
        steady, burst, sweep = build_fleet(sim.base_url)
        for pool in chosen:
            results[pool] = measure_pool(pool, sizes[pool], steady, burst, sweep, minutes)
    print()
    print(table(results))
    if args.json:
        first, *others = chosen
        out = {**results[first], "pool": first, "concurrency": sizes[first], "minutes": minutes}
        for pool in others:
            out["baseline"] = {**results[pool], "pool": pool, "concurrency": sizes[pool]}
        print(json.dumps(out))


if __name__ == "__main__":
    main()
