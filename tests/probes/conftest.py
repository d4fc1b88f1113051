"""Scheduling tests: real Postgres, real Redis, real Celery workers, a real simulator.

Run with their own database and Redis DB, e.g.
    DATABASE_TEST_NAME=test_iw_sched CELERY_BROKER_URL=redis://127.0.0.1:6379/2 \
    INFERWATCH_ENV=test .venv/bin/python -m pytest tests/probes -q
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from django.conf import settings
from django.db import connection

from probes.models import CanonicalModel, Endpoint, Price, Probe, Provider, Workload
from probes.platform.redis_client import redis_client
from probes.simulator import SimulatorProcess, start_in_process
from tests.conftest import ROOT


def wait_for(condition: Callable[[], object], timeout_s: float = 20.0, every: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    return None


def current_slot() -> datetime:
    """A slot due now: a worker skips a slot it could only start late
    (probes/scheduling/lateness.py), so a test that sends a task by hand must name a slot
    that is on time."""
    return datetime.now(UTC).replace(microsecond=0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def sim() -> Iterator[SimulatorProcess]:
    """One simulated provider in a child process; profiles chosen by model name."""
    with start_in_process() as handle:
        yield handle


@pytest.fixture(autouse=True)
def clean_redis() -> Iterator[redis.Redis]:
    """This session's Redis DB (REDIS_URL = the test broker DB), empty for every test."""
    client = redis_client()
    client.flushdb()
    yield client
    client.flushdb()


@pytest.fixture
def workload(db) -> Workload:
    return Workload.objects.create(
        slug="tiny",
        name="Tiny",
        material="fixed",
        messages=[{"role": "user", "content": "Count."}],
        max_tokens=60,
    )


@pytest.fixture
def make_probe(db, sim, workload) -> Callable[..., Probe]:
    """A probe on its own provider at the simulator; model picks the speed or fault."""
    made = {"n": 0}

    def make(
        model: str = "sim-fast",
        region: str = "local",
        provider: Provider | None = None,
        **probe_fields,
    ) -> Probe:
        made["n"] += 1
        n = made["n"]
        if provider is None:
            provider = Provider.objects.create(
                name=f"Sim {n}",
                slug=f"sim-{n}",
                base_url=sim.base_url,
                requires_key=False,
                enabled=True,
                simulated=True,
                stall_timeout_s=1.0,
                first_token_timeout_s=5.0,
                total_timeout_s=8.0,
            )
        canonical, _ = CanonicalModel.objects.get_or_create(slug="m", defaults={"name": "M"})
        # The simulator reads the profile from the model name; the seed keeps ids apart.
        model_id = f"{model},seed={n}" if "@" in model else f"{model}@seed={n}"
        endpoint = Endpoint.objects.create(
            provider=provider, model_id=model_id, canonical_model=canonical
        )
        Price.objects.create(
            endpoint=endpoint,
            effective_from=date(2020, 1, 1),
            input_per_m=Decimal("1.0"),
            output_per_m=Decimal("2.0"),
        )
        fields = {"interval_s": 60, "jitter_s": 0} | probe_fields
        return Probe.objects.create(endpoint=endpoint, workload=workload, region=region, **fields)

    return make


@pytest.fixture
def counting_provider():
    """A real HTTP server that counts every request it receives and answers 401."""
    received: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            received.append(f"{self.command} {self.path}")
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _answer  # noqa: N815 (http.server's naming)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", received
    server.shutdown()


# -- real Celery workers ----------------------------------------------------------------------


def database_url(port: int | None = None) -> str:
    db = connection.settings_dict
    host = quote(db["HOST"] or "127.0.0.1", safe="")
    port = port or db["PORT"]
    return f"postgresql://{db['USER']}@{host}{f':{port}' if port else ''}/{db['NAME']}"


@dataclass
class Worker:
    proc: subprocess.Popen
    log: Path
    name: str

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def children(self) -> list[int]:
        out = subprocess.run(
            ["ps", "-o", "pid=", "--ppid", str(self.proc.pid)], capture_output=True, text=True
        ).stdout
        return [int(p) for p in out.split()]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@dataclass
class Processes:
    tmp: Path
    started: list = field(default_factory=list)

    def worker(
        self,
        name: str,
        queues: str = "celery,probes.local",
        concurrency: int = 2,
        region: str = "local",
        broker: str | None = None,
        db_port: int | None = None,
        env: dict[str, str] | None = None,
        own_session: bool = False,
        pool: str = "threads",
    ) -> Worker:
        """own_session: the worker leads its own process group, so a test can SIGKILL
        the whole worker (main process and children) with os.killpg. pool: the threads
        pool of `make run` (every probe on one event loop), or "prefork" (a process per
        probe) for what only a pool process can show."""
        log = self.tmp / f"{name}.log"
        environ = (
            os.environ
            | {
                "INFERWATCH_ENV": "test",
                "DATABASE_URL": database_url(db_port),
                "CELERY_BROKER_URL": broker or settings.CELERY_BROKER_URL,
                "REDIS_URL": broker or settings.REDIS_URL,
                "PROBE_REGION": region,
                "PYTHONUNBUFFERED": "1",
                "WORKER_POOL": pool,
            }
            | (env or {})
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-n", f"{name}@%h",
             "-Q", queues, "-c", str(concurrency), "--without-gossip", "--without-mingle",
             "-l", "INFO"],
            cwd=ROOT, env=environ, stdout=log.open("w"), stderr=subprocess.STDOUT,
            start_new_session=own_session,
        )  # fmt: skip
        worker = Worker(proc, log, f"{name}@{socket.gethostname()}")
        self.started.append(worker)
        if not wait_for(lambda: "ready." in worker.log.read_text(errors="replace"), 30):
            raise AssertionError(f"worker {name} did not start:\n{worker.output()}")
        return worker

    def beat(self, broker: str, env: dict[str, str] | None = None) -> Worker:
        log = self.tmp / "beat.log"
        environ = (
            os.environ
            | {
                "INFERWATCH_ENV": "test",
                "DATABASE_URL": database_url(),
                "CELERY_BROKER_URL": broker,
                "REDIS_URL": broker,
                "PYTHONUNBUFFERED": "1",
            }
            | (env or {})
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "dashboard", "beat", "-l", "INFO",
             "--max-interval", "1"],
            cwd=ROOT, env=environ, stdout=log.open("w"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        beat = Worker(proc, log, "beat")
        self.started.append(beat)
        return beat

    def stop_all(self) -> None:
        for process in reversed(self.started):
            process.stop()


@pytest.fixture
def processes(tmp_path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    yield procs
    procs.stop_all()


# -- private services for restart tests (never the machine's shared ones) ------------------


@dataclass
class PrivateRedis:
    port: int
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server") or str(ROOT / ".venv/bin/redis-server")
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert wait_for(lambda: _answers(self.port), 10), "private redis did not start"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture
def private_redis() -> Iterator[PrivateRedis]:
    server = PrivateRedis(free_port())
    server.start()
    yield server
    server.stop()


class TcpProxy:
    """A TCP relay in front of Postgres: 'down' drops every connection and refuses new
    ones, exactly what a client sees while the database restarts."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        with self._lock:
            if self._listener:
                # Shut down first: a close alone leaves the accept() blocked in the relay's
                # thread listening, and it would take one more connection.
                with contextlib.suppress(OSError):
                    self._listener.shutdown(socket.SHUT_RDWR)
                self._listener.close()
                self._listener = None
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def db_proxy() -> Iterator[TcpProxy]:
    port = int(connection.settings_dict["PORT"] or 5432)
    proxy = TcpProxy(port)
    proxy.up()
    yield proxy
    proxy.down()
