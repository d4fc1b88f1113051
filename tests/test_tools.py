"""The machine's tools (Debian's chromium, prometheus, promtool): `make test` installs them
or says how (.ci/debian-packages), and a test that needs a missing one is skipped on a
developer's machine but fails in CI (tests/tools.py). Their absence is a PATH without them:
the tests and the script look tools up on PATH only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

NOBODY = "65534"  # uid and gid of Debian's nobody / nogroup: a user who is not root

USES_CHROMIUM = """
from tests.dashboard.web.test_browser import browser  # noqa: F401 (the fixture)


def test_in_chromium(browser):  # noqa: F811
    assert browser
"""


def run_pytest_without_tools(tmp_path, **env: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_needs_chromium.py"
    test.write_text(USES_CHROMIUM)
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_XDIST_WORKER")}
    environ.update(PATH=str(tmp_path), PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
         str(ROOT), "-p", "no:cacheprovider", "-p", "no:xdist", "-rA", str(test)],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_browser_test_without_chromium_is_skipped_with_the_command_that_installs_it(tmp_path):
    done = run_pytest_without_tools(tmp_path)
    assert "1 skipped" in done.stdout, done.stdout[-3000:]
    assert "apt-get install --no-install-recommends chromium" in done.stdout


def test_in_ci_a_browser_test_without_chromium_fails(tmp_path):
    done = run_pytest_without_tools(tmp_path, CI="true")
    assert done.returncode != 0
    summary = done.stdout.strip().splitlines()[-1]
    assert "skipped" not in summary and "1 error" in summary, done.stdout[-3000:]
    assert "chromium is not on PATH, and CI runs every test" in done.stdout


@pytest.fixture
def bin_dir():
    """A PATH directory another user can read (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="iw-tools-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


def debian_packages(bin_dir, *commands: str, user: str | None = None):
    """.ci/debian-packages as `user`, with a PATH holding only `commands` (links to the
    real ones)."""
    for name in ("bash", "id", *commands):
        (bin_dir / name).symlink_to(shutil.which(name))
    prefix = [shutil.which("setpriv"), f"--reuid={user}", f"--regid={user}", "--clear-groups"]
    return subprocess.run(
        [*prefix, str(ROOT / ".ci/debian-packages"),
         "chromium=chromium", "prometheus=prometheus", "promtool=prometheus"],
        env={"PATH": str(bin_dir)}, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


def test_not_root_the_set_up_stops_at_once_with_the_exact_command(bin_dir):
    done = debian_packages(bin_dir, "apt-get", user=NOBODY)
    assert done.returncode == 1
    assert "sudo apt-get update && sudo apt-get install -y --no-install-recommends" in done.stderr
    assert done.stderr.rstrip().endswith("chromium prometheus")  # once each


def test_with_every_tool_on_path_the_set_up_does_nothing(bin_dir):
    done = debian_packages(bin_dir, "chromium", "prometheus", "promtool", user=NOBODY)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
