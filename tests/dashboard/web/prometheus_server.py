"""A real Prometheus (Debian's package) scraping the app under test, for the tests.

Started on a free loopback port with a scrape config pointing at pytest-django's live
server; its HTTP API answers the tests' PromQL.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.tools import require

SCRAPE_INTERVAL_S = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, url: str, process: subprocess.Popen, log: Path) -> None:
        self.url = url
        self.process = process
        self.log = log

    def get(self, path: str, **params) -> dict:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """An instant query's result vector: [{"metric": {...}, "value": [t, "1.5"]}, ...]."""
        try:
            return self.get("/api/v1/query", query=expr)["result"]
        except urllib.error.HTTPError as error:  # a bad expression: say which and why
            raise AssertionError(f"{expr}: {error.read().decode()}") from None

    def wait_for_scrapes(self, n: int, timeout_s: float = 90) -> None:
        """Until the app has been scraped successfully `n` more times from now."""
        start = self._scrapes()
        deadline = time.monotonic() + timeout_s
        while self._scrapes() < start + n:
            if time.monotonic() > deadline:
                targets = self.get("/api/v1/targets")
                raise AssertionError(f"no {n} scrapes in {timeout_s} s: {targets}")
            time.sleep(0.3)

    def _scrapes(self) -> int:
        # Successful scrapes of the last 10 minutes: `up` is 1 once per good scrape.
        result = self.query('sum_over_time(up{job="inferwatch"}[10m])')
        return int(float(result[0]["value"][1])) if result else 0


@contextmanager
def running_prometheus(target: str, workdir: Path) -> Iterator[Prometheus]:
    """Prometheus scraping http://`target`/metrics every SCRAPE_INTERVAL_S seconds."""
    binary = require("prometheus")
    port = _free_port()
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {SCRAPE_INTERVAL_S}s\n"
        f"  scrape_timeout: {SCRAPE_INTERVAL_S}s\n"
        "scrape_configs:\n"
        "  - job_name: inferwatch\n"
        "    metrics_path: /metrics\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n"
    )
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    prometheus = Prometheus(f"http://127.0.0.1:{port}", process, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"prometheus did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield prometheus
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
