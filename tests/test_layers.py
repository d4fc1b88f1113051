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
        "print(len(_state._apps), getattr(kombu_redis.Channel._connparams, 'guarded', False))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "False"]


def test_celery_finds_the_app_where_it_starts():
    # The app sends; what only a worker needs is set up as `celery worker` starts
    # (celeryd_init, before the worker's blueprint and its first broker connection).
    done = _python(
        "from types import SimpleNamespace\n"
        "from celery.app.utils import find_app\n"
        "from celery.signals import celeryd_init\n"
        "from kombu.transport import redis as kombu_redis\n"
        "app = find_app('dashboard')\n"
        "def guarded():\n"
        "    return getattr(kombu_redis.Channel._connparams, 'guarded', False)\n"
        "def steps():\n"
        "    return sorted(s.__name__ for s in app.steps['worker'])\n"
        "print(app.main, 'dashboard.tasks.maintain_rollups' in app.conf.beat_schedule.get("
        "'maintain-rollups', {}).values(), guarded(), steps())\n"
        "celeryd_init.send(sender='w@h', instance=SimpleNamespace(app=app), conf=app.conf)\n"
        "print(guarded(), steps())"
    )
    assert done.returncode == 0, done.stderr
    before, after = done.stdout.splitlines()
    assert before == "inferwatch True False []"
    assert after == "True ['DiskSpoolFlush', 'WorkerHeartbeat']"


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


def import_cycles(graph) -> list[tuple[str, ...]]:
    """Every import cycle between modules of `graph` (one shortest chain per cycle): an
    import a -> b is in a cycle when b leads back to a."""
    cycles: dict[frozenset[str], tuple[str, ...]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back:
                cycle = (importer, *back)
                cycles.setdefault(frozenset(cycle), cycle)
    return sorted(cycles.values())


def _graph(*packages: str):
    import grimp

    # Function-level and TYPE_CHECKING imports count: a circle drawn only for the type
    # checker still says two rooms lean on each other (issue 23 item 4).
    return grimp.build_graph(
        *packages,
        include_external_packages=False,
        exclude_type_checking_imports=False,
        cache_dir=None,
    )


def test_no_import_cycles_between_modules():
    assert import_cycles(_graph("probes", "dashboard")) == []


def test_the_cycle_finder_sees_an_import_inside_a_function(tmp_path, monkeypatch):
    package = tmp_path / "circle_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circle_pkg import b\n")
    (package / "b.py").write_text("def late():\n    from circle_pkg import c\n")
    (package / "c.py").write_text("import circle_pkg.a\n")
    (package / "d.py").write_text("import circle_pkg.a\n")  # leads in, not round
    monkeypatch.syspath_prepend(str(tmp_path))
    cycles = import_cycles(_graph("circle_pkg"))
    assert [set(cycle) for cycle in cycles] == [{"circle_pkg.a", "circle_pkg.b", "circle_pkg.c"}]


# Big libraries a command must not pay for unless it uses them (issue 23 item 7): each is
# imported inside the function that needs it. The HTTP client and the metrics parser load
# where a request is sent or a scrape parsed; redis (whose version 8 imports the
# OpenTelemetry SDK itself) with the first Redis client; what only a Celery worker needs
# as a worker starts (dashboard/celery.py).
HEAVY = (
    *("scipy", "numpy", "plotly", "jsonschema", "bpe_openai", "tokenizers", "playwright"),
    *("httpx", "httpcore", "h2", "prometheus_client", "redis", "opentelemetry"),
)
HEAVY_OURS = ("probes.platform.otel",)


def test_manage_py_help_measure_imports_no_heavy_library():
    done = _python(
        "import contextlib, io, runpy, sys\n"
        "sys.argv = ['manage.py', 'help', 'measure']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        "    runpy.run_path('manage.py', run_name='__main__')\n"
        "assert 'usage: manage.py measure' in out.getvalue(), out.getvalue()\n"
        f"heavy = {HEAVY!r}; ours = {HEAVY_OURS!r}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)),"
        " sorted(set(ours) & set(sys.modules)), 'django.contrib.admin' in sys.modules)"
    )
    assert done.returncode == 0, done.stderr
    # Django did start (the admin is loaded), and none of the heavy modules came with it.
    assert done.stdout.strip() == "[] [] True"
