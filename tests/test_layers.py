"""The layers hold: probes.engine <- probes <- dashboard, one way, and importing has no
side effects (README "Layout"; the contracts are in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_the_import_contracts_are_kept():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_the_engine_imports_without_django():
    done = _python(
        "import sys, probes.engine\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'dashboard')))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_importing_the_apps_creates_no_celery_app_and_patches_nothing():
    done = _python(
        "import dashboard, dashboard.celery, probes.scheduling.heartbeat\n"
        "from celery import _state\n"
        "from kombu.transport import redis as kombu_redis\n"
        "from dashboard import broker\n"
        "print(len(_state._apps),"
        " kombu_redis.Channel._connparams is broker._connparams_of_a_live_connection)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "False"]


def test_celery_finds_the_app_where_it_starts():
    done = _python(
        "from celery.app.utils import find_app\n"
        "from kombu.transport import redis as kombu_redis\n"
        "from dashboard import broker\n"
        "app = find_app('dashboard')\n"
        "print(app.main, 'dashboard.tasks.maintain_rollups' in app.conf.beat_schedule.get("
        "'maintain-rollups', {}).values(),"
        " kombu_redis.Channel._connparams is broker._connparams_of_a_live_connection)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["inferwatch", "True", "True"]


def test_no_module_is_over_600_lines():
    # Small rooms that say what they hold (issue 12): split a module before it grows past
    # this; migrations are generated and exempt.
    long = {
        str(path.relative_to(ROOT)): n
        for app in ("probes", "dashboard")
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > 600
    }
    assert long == {}
