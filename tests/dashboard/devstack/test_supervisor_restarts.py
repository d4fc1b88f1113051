"""`make run` keeps the observatory up for weeks: a crashed worker is restarted (and
/status says so), and only a child that keeps crashing stops everything.

The real supervisor runs in a subprocess against the machine's Postgres (a database of
its own) and this session's Redis DB, on free ports.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import psycopg
import pytest
from django.conf import settings

from dashboard.devstack.runstate import RunState, write_state
from dashboard.devstack.supervisor import backoff_s
from tests.conftest import ROOT, clean_env
from tests.dashboard.devstack.test_devstack import free_port

pytestmark = pytest.mark.timeout(300)

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def wait_until(condition: Callable[[], object], timeout_s: float, every: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(every)
    return None


@dataclass
class Run:
    proc: subprocess.Popen
    log: Path
    var: Path
    port: int

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def children(self) -> dict[str, int]:
        try:
            return json.loads((self.var / "devstack.json").read_text())["children"]
        except (OSError, ValueError, KeyError):
            return {}

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=5) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as exc:  # /readyz answers 503 while a part is down
            return exc.code, exc.read()

    def status_check(self, name: str) -> dict | None:
        _, body = self.get("/status?format=json")
        return next((c for c in json.loads(body)["checks"] if c["name"] == name), None)

    def kill_worker(self) -> int:
        """SIGKILL the worker's main process, as the OOM killer would."""
        pid = self.children()["worker"]
        os.kill(pid, signal.SIGKILL)
        return pid

    def new_worker_pid(self, old: int, timeout_s: float = 90) -> int | None:
        def replaced() -> int | None:
            pid = self.children().get("worker")
            return pid if pid not in (None, old) else None

        return wait_until(replaced, timeout_s)


def _own_database() -> str:
    """A database for the supervisor's app, apart from the test database and other
    sessions' (DATABASE_TEST_NAME is per session)."""
    name = f"{os.environ.get('DATABASE_TEST_NAME', 'test_inferwatch')}_run"
    try:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError:
        pytest.skip("no Postgres at 127.0.0.1:5432")
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


@pytest.fixture
def make_run(tmp_path) -> Iterator[Run]:
    port, simulator_port = free_port(), free_port()
    log = tmp_path / "run.log"
    environment = clean_env(
        INFERWATCH_VAR_DIR=str(tmp_path),
        STATIC_ROOT=str(tmp_path / "static"),
        PORT=str(port),
        SIMULATOR_URL=f"http://127.0.0.1:{simulator_port}",
        DATABASE_URL=_own_database(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        REDIS_URL=settings.REDIS_URL,
        ADMIN_USER="operator",
        ADMIN_PASSWORD="not a secret in this test",
    )
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dashboard.devstack", "run"],
            cwd=ROOT,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    run = Run(proc, log, tmp_path, port)
    try:
        started = wait_until(
            lambda: proc.poll() is not None or "Inferwatch is at" in run.output(), 180
        )
        assert started and proc.poll() is None, run.output()
        # The worker is up (it has taken its queues) before the tests kill it.
        assert wait_until(lambda: "ready." in run.output(), 90), run.output()
        yield run
    finally:
        pids = list(run.children().values())
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
        for pid in pids:
            assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"


def test_a_worker_killed_with_sigkill_is_restarted_and_status_says_so(make_run):
    run = make_run
    old = run.kill_worker()

    new = run.new_worker_pid(old)
    assert new, run.output()
    assert psutil.Process(new).is_running()
    output = run.output()
    assert "worker exited unexpectedly (killed by SIGKILL (-9)); restarting it in 1 s" in output
    assert f"worker restarted (pid {new})" in output
    assert "stopping everything" not in output
    # The new worker takes its queues again, and the rest never stopped.
    assert wait_until(lambda: run.output().count("ready.") >= 2, 90), run.output()
    assert run.proc.poll() is None
    assert run.get("/")[0] == 200
    check = run.status_check("restarts")
    assert check is not None and check["state"] == "warn", check
    assert re.fullmatch(
        r"worker restarted 1× \(last \d{4}-\d\d-\d\d \d\d:\d\d UTC, killed by SIGKILL \(-9\)\)\.",
        check["message"],
    ), check["message"]


def test_a_worker_that_keeps_crashing_stops_everything_with_a_clear_message(make_run):
    run = make_run
    old = run.kill_worker()
    for _ in range(4):  # four restarts, then the fifth crash within minutes
        new = run.new_worker_pid(old)
        assert new, run.output()
        os.kill(new, signal.SIGKILL)
        old = new

    assert run.proc.wait(60) == 1, run.output()
    output = run.output()
    # Back-off between restarts: 1 s, doubling.
    waits = [float(w) for w in re.findall(r"restarting it in (\d+) s", output)]
    assert waits == [backoff_s(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    lines = output.strip().splitlines()
    assert any(
        "worker crashed 5 times within 5 min (last: killed by SIGKILL (-9)); it keeps "
        "crashing, so stopping everything" in line
        for line in lines
    ), output
    assert lines[-1].endswith("stopped")
    assert not (run.var / "devstack.json").exists()


def restarts_check(client) -> dict | None:
    checks = client.get("/status?format=json").json()["checks"]
    return next((c for c in checks if c["name"] == "restarts"), None)


@pytest.mark.django_db
def test_status_warns_of_a_recent_restart_and_keeps_older_ones_as_history(
    client, tmp_path, monkeypatch
):
    monkeypatch.setenv("INFERWATCH_VAR_DIR", str(tmp_path))
    assert restarts_check(client) is None  # not under `make run`: nothing to say

    now = datetime.now(UTC)
    state = RunState(supervisor=os.getpid(), started_at=(now - timedelta(days=3)).isoformat())
    write_state(state)
    assert restarts_check(client)["state"] == "ok"

    state.record_restart("worker", now - timedelta(hours=30), -9)
    write_state(state)
    check = restarts_check(client)
    assert check["state"] == "ok"  # a day and more ago: history
    assert check["message"].startswith("worker restarted 1× (last ")
    assert check["message"].endswith(" UTC, killed by SIGKILL (-9)).")

    state.record_restart("beat", now - timedelta(minutes=2), 1)
    state.record_restart("worker", now - timedelta(minutes=1), -9)
    write_state(state)
    check = restarts_check(client)
    assert check["state"] == "warn"
    assert "beat restarted 1× (last " in check["message"]
    assert "exit code 1" in check["message"]
    assert "worker restarted 2× (last " in check["message"]
    assert [d["process"] for d in check["details"]] == ["beat", "worker", "worker"]

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    state.supervisor = gone.pid  # a supervisor that was killed: its file is stale
    write_state(state)
    assert restarts_check(client) is None
