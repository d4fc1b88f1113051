"""`python -m dashboard.devstack run|test|stop`: the commands behind `make run`,
`make test` and `make stop`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from urllib.parse import urlsplit

from dashboard.devstack.common import MANAGE, STOP_GRACE_S, StackError, signal_group, var_dir
from dashboard.devstack.prepare import prepare_database_and_files, setup_django
from dashboard.devstack.runstate import RunState, read_state, running_state, state_path
from dashboard.devstack.services import (
    EmbeddedPostgres,
    EmbeddedRedis,
    require_free_port,
    site_answers,
    start_services,
)
from dashboard.devstack.supervisor import CrashLoop, Supervisor

# --- make test ------------------------------------------------------------------------


# What one parallel test process may hold at its peak besides itself: a Celery worker or
# two, a simulator, Chromium (the run's largest process peaked at 0.56 GB; a margin kept).
TEST_WORKER_MEMORY = 1_500 * 2**20


def available_memory() -> int:
    """Bytes the kernel could hand out now (MemAvailable), or the free pages elsewhere."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def parallel_processes(cores: int | None = None, memory: int | None = None) -> int:
    """One test process per core the run may use, as many as the memory holds. Not more:
    a third process on two cores was faster (9.5-10 min against 12 min 49 s) but left
    the accuracy tests' simulated provider without a core for 40 ms at times."""
    cores = cores or len(os.sched_getaffinity(0))
    memory = available_memory() if memory is None else memory
    return max(1, min(cores, memory // TEST_WORKER_MEMORY))


def pytest_args(args: list[str], workers: int) -> list[str]:
    """The whole suite (`make test`, no arguments) runs files side by side, one per test
    process (pytest-xdist; tests/parallel.py gives each its own Redis DB, pytest-django
    its own database); a named file or test runs as asked, in this process."""
    if args or workers < 2:
        return args
    return ["-n", str(workers), "--dist", "loadfile"]


def run_tests(args: list[str]) -> int:
    pytest_no_tests = 5  # pytest.ExitCode.NO_TESTS_COLLECTED; must count as a failure
    env = dict(os.environ)
    env.setdefault("INFERWATCH_ENV", "test")
    services = start_services(env, prefer_local=True)
    env.update(services.env)
    try:
        # A child, not exec: the embedded servers (if any) are stopped after the run.
        # Parallel by default (parallel_processes; INFERWATCH_TEST_PROCESSES=1: one only).
        wanted = env.get("INFERWATCH_TEST_PROCESSES") or "auto"
        workers = parallel_processes() if wanted == "auto" else int(wanted or 1)
        argv = pytest_args(args, workers)
        code = subprocess.call([sys.executable, "-m", "pytest", *argv], env=env)
        if code == pytest_no_tests:
            print(
                "error: pytest collected no tests; a run that tests nothing fails.", file=sys.stderr
            )
        return code
    except KeyboardInterrupt:
        return 130
    finally:
        services.stop()


# --- manage.py against make run's services -----------------------------------------------


def run_manage(args: list[str]) -> int:
    """`manage.py ARGS` with `make run`'s settings and its embedded Postgres and Redis.

    A plain shell has neither (production defaults, no SECRET_KEY, the machine's Postgres);
    this attaches to the running servers, or starts them for the one command.
    """
    env = dict(os.environ)
    env.setdefault("INFERWATCH_ENV", "development")
    services = start_services(env, prefer_local=False)
    env.update(services.env)
    try:
        return subprocess.call([sys.executable, MANAGE, *args], env=env)
    except KeyboardInterrupt:
        return 130
    finally:
        services.stop()  # stops only servers this command started itself


# --- make run ---------------------------------------------------------------------------
def _is_local(host: str | None) -> bool:
    return host in {"127.0.0.1", "localhost"}


# Ctrl-C lets the worker's warm shutdown finish the probes in flight for this long (the
# demo's take seconds); past it they are abandoned: not recorded, never a failure.
WORKER_STOP_GRACE_S = 30.0


def child_commands(settings, port: int) -> list[tuple[str, list[str]]]:
    """The children in start order; the supervisor stops them in reverse, so what
    measures (worker, beat) stops before what is measured (the simulator)."""
    py = sys.executable
    region = settings.PROBE_REGION
    commands = []
    simulator = urlsplit(settings.SIMULATOR_URL)
    if _is_local(simulator.hostname):  # else the demo's simulator runs elsewhere
        commands.append(
            (
                "simulator",
                [py, MANAGE, "simulate_provider", "--host", simulator.hostname,
                 "--port", str(simulator.port or 80)],
            )
        )  # fmt: skip
    commands += [
        (
            # --preload: Django is imported once, before the workers fork, not once per
            # worker while the Celery processes import it too on the same cores.
            "web",
            [py, "-m", "gunicorn", "dashboard.wsgi:application", "--preload",
             "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4",
             "--graceful-timeout", "5", "--access-logfile", "-", "--log-level", "warning"],
        ),
        (
            "worker",
            [py, "-m", "celery", "-A", "dashboard", "worker", "-l", "INFO",
             "-n", f"{region}@%h", "-Q", ",".join(worker_queues(region)),
             "--concurrency", str(settings.WORKER_MAX_CONCURRENT_PROBES)],
        ),
        ("beat", [py, "-m", "celery", "-A", "dashboard", "beat", "-l", "INFO"]),
    ]  # fmt: skip
    return commands


# How long `make run` gives the site to answer before starting the rest anyway (a first
# start on a slow machine takes ~10 s; the log then says the site is not answering yet).
SITE_WAIT_S = 120.0


def wait_for_site(supervisor: Supervisor, port: int, timeout_s: float = SITE_WAIT_S) -> bool:
    """Until / answers 200, the web server exits (the supervisor then restarts it) or we
    are asked to stop: whether the site answered."""
    web = next(child for child in supervisor.children if child.name == "web")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not supervisor.stopping.is_set():
        if web.proc is None or web.proc.poll() is not None:
            return False
        if site_answers(port):
            return True
        supervisor.stopping.wait(0.2)
    return False


def worker_queues(region: str) -> list[str]:
    """Every queue a worker of `region` consumes: its probes and the maintenance tasks."""
    from probes.scheduling.dispatch import queue_for

    return [queue_for(region), "celery"]


def run_app() -> int:
    began = time.monotonic()
    env = dict(os.environ)
    env.setdefault("INFERWATCH_ENV", "development")
    env["PYTHONUNBUFFERED"] = "1"
    port_text = env.get("PORT", "8000")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise StackError(f"PORT={port_text!r} is not a port number (1-65535).")
    port = int(port_text)
    require_free_port("127.0.0.1", port, "web server", "PORT")
    running = running_state()
    if running is not None:  # on another PORT: it would share, then drop, that run's state
        raise StackError(
            f"`make run` is already running from {var_dir()} (pid {running.supervisor}): "
            "stop it first (Ctrl-C, or `make stop`), or give this one its own "
            "INFERWATCH_VAR_DIR."
        )
    env.setdefault("SITE_URL", f"http://127.0.0.1:{port}")  # links in alert notices
    var_dir().mkdir(parents=True, exist_ok=True)

    state = RunState(supervisor=os.getpid(), started_at=datetime.now(UTC).isoformat())
    supervisor = Supervisor(env, state)
    services = start_services(env, prefer_local=False)
    supervisor.env.update(services.env)

    def request_stop(signum, frame) -> None:
        supervisor.stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    say = supervisor.say
    try:
        setup_django(supervisor.env)
        from django.conf import settings

        simulator = urlsplit(settings.SIMULATOR_URL)
        if _is_local(simulator.hostname):
            require_free_port(
                simulator.hostname, simulator.port or 80, "simulated providers", "SIMULATOR_URL"
            )
        prepare_database_and_files(lambda line: say("devstack", line))
        if supervisor.stopping.is_set():
            return 130
        answered = False
        for name, argv in child_commands(settings, port):
            if supervisor.stopping.is_set():
                break  # Ctrl-C while the site was starting: start nothing more
            # The worker may finish its in-flight probes before it is killed (stop()).
            grace = WORKER_STOP_GRACE_S if name == "worker" else STOP_GRACE_S
            supervisor.start(name, argv, stop_grace_s=grace)
            if name == "web":
                # The site has the cores to itself until it answers, so the line below is
                # true when printed; what measures starts seconds later.
                answered = wait_for_site(supervisor, port)
        if answered:
            state = f"answering after {time.monotonic() - began:.1f} s"
        else:
            state = "not answering yet: see web's lines above"
        if not supervisor.stopping.is_set():
            url = f"http://127.0.0.1:{port}/"
            say("devstack", f"Inferwatch is at {url} (admin: /admin/; {state}) — Ctrl-C stops")
        try:
            supervisor.wait()
        except CrashLoop as exc:
            say("devstack", str(exc))
            return 1
        return 0
    finally:
        say("devstack", "stopping…")
        supervisor.stop()
        services.stop()
        state_path().unlink(missing_ok=True)
        say("devstack", "stopped")


def stop_app() -> int:
    """Stop a running `make run`, or clean up after one that was killed."""
    state = read_state()
    if state is not None:
        try:
            os.kill(state.supervisor, signal.SIGTERM)
            print("asked the running `make run` to stop")
            return 0
        except ProcessLookupError:
            for pgid in state.groups:
                signal_group(pgid, signal.SIGKILL)
            state_path().unlink()
    EmbeddedRedis(var_dir() / "redis").shutdown_leftover()
    EmbeddedPostgres(var_dir() / "pgdata").shutdown_leftover()
    print("stopped")
    return 0


USAGE = "usage: python -m dashboard.devstack {run|test [pytest args]|stop|manage COMMAND [args]}"


def main(argv: list[str]) -> int:
    commands = {
        "run": lambda: run_app(),
        "test": lambda: run_tests(argv[1:]),
        "stop": stop_app,
        "manage": lambda: run_manage(argv[1:]),
    }
    if not argv or argv[0] not in commands:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        return commands[argv[0]]()
    except StackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        from django.core.exceptions import ImproperlyConfigured

        if isinstance(exc, ImproperlyConfigured):
            print(f"configuration error: {exc}", file=sys.stderr)
            return 1
        raise
