"""The README's commands, typed in a newcomer's shell after `make run`.

That shell has none of our variables: INFERWATCH_ENV is unset (so production) and there is
no SECRET_KEY. Commands that need no secret run anyway; every setup mistake is one line.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from probes.simulator import start_in_process
from tests.conftest import ROOT


def newcomer(*args: str, cwd: Path, timeout: float = 60, **extra: str):
    env = {"HOME": str(cwd), "PATH": "/usr/bin:/bin", **extra}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=cwd,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def test_measure_runs_without_a_secret(tmp_path):
    with start_in_process() as sim:
        done = newcomer(
            "measure", "--base-url", sim.base_url, "--model", "sim", "--json", cwd=tmp_path
        )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["status"] == "ok"


def test_simulate_provider_runs_without_a_secret(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "simulate_provider", "--port", str(port)],
        cwd=tmp_path,
        env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and server.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        assert server.poll() is None, server.stderr.read()
        done = newcomer(
            "measure", "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "sim", "--json",
            cwd=tmp_path,
        )  # fmt: skip
        assert orjson.loads(done.stdout)["status"] == "ok"
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.parametrize(
    "extra, expected",
    [
        ({}, "configuration error: SECRET_KEY is not set"),
        ({"INFERWATCH_ENV": "staging"}, "configuration error: INFERWATCH_ENV='staging'"),
        ({"INFERWATCH_ENV": "development", "DEBUG": "maybe"}, "DEBUG='maybe' is not a boolean"),
        (
            {
                "INFERWATCH_ENV": "development",
                "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/x",
            },
            "database error: ",
        ),
    ],
)
def test_a_setup_mistake_is_one_line_without_a_traceback(tmp_path, extra, expected):
    done = newcomer("migrate", cwd=tmp_path, INFERWATCH_VAR_DIR=str(tmp_path / "var"), **extra)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert expected in lines[0]
    assert "Traceback" not in done.stderr
