"""Concurrent visitors against gunicorn, as `make run` starts it (2 workers × 4 threads):
each visitor walks the pages in turn and asks for each page twice, the second time with
the ETag it got (If-None-Match), as a reload or the table's refresh does; the figures show
the server time under load and the share of those revalidations answered 304 Not
Modified. Used by bench_pages.py --concurrent.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_gunicorn(database_url: str) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "LOG_LEVEL": "ERROR"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "dashboard.wsgi:application",
         "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4",
         "--graceful-timeout", "5", "--log-level", "warning"],
        cwd=ROOT, env=env,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(base + "/methodology/", timeout=5).read()
            return process, base
        except OSError:
            time.sleep(0.3)
    process.terminate()
    raise SystemExit("gunicorn did not answer within 60 s")


def _get(url: str, etag: str | None) -> tuple[int, str | None]:
    request = urllib.request.Request(url, headers={"If-None-Match": etag} if etag else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
            return response.status, response.headers.get("ETag")
    except urllib.error.HTTPError as error:  # 304 arrives as an HTTPError
        return error.code, error.headers.get("ETag") or etag


def run(pages: dict[str, str], database_url: str, visitors: int, seconds: float) -> None:
    process, base = start_gunicorn(database_url)
    times: dict[str, list[float]] = defaultdict(list)
    not_modified: dict[str, int] = defaultdict(int)
    revalidations: dict[str, int] = defaultdict(int)
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def visitor(offset: int) -> None:
        etags: dict[str, str | None] = {}
        names = list(pages)
        i = offset
        while time.monotonic() < stop:
            name = names[i % len(names)]
            i += 1
            for revalidate in (False, True):
                t0 = time.perf_counter()
                status, etag = _get(base + pages[name], etags.get(name) if revalidate else None)
                ms = (time.perf_counter() - t0) * 1000
                etags[name] = etag
                with lock:
                    times[name].append(ms)
                    revalidations[name] += revalidate
                    not_modified[name] += status == 304

    try:
        threads = [threading.Thread(target=visitor, args=(n,)) for n in range(visitors)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        process.terminate()
        process.wait(timeout=15)
    print(f"\n{visitors} concurrent visitors for {seconds:.0f} s against gunicorn (2 × 4):")
    print(f"{'page':40} {'requests':>8} {'p50 ms':>8} {'p95 ms':>8} {'304s of revalidations':>22}")
    for name in pages:
        got = times[name]
        if not got:
            continue
        p95 = sorted(got)[max(0, round(0.95 * len(got)) - 1)]
        share = not_modified[name] / max(1, revalidations[name])
        median = statistics.median(got)
        print(f"{name:40} {len(got):8d} {median:8.1f} {p95:8.1f} {share:22.0%}")
