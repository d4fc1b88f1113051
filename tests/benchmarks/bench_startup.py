"""How fast a command starts: `manage.py help measure` against Django's own floor.

    .venv/bin/python tests/benchmarks/bench_startup.py [--repeat 15]

Each command runs as a newcomer's shell runs it: an environment with only PATH, HOME and
LANG (no PYTHONDONTWRITEBYTECODE, so the project's bytecode is cached as it is after the
first run; one warm-up run each is not counted). The runs are interleaved, so a busy
moment of the machine falls on all three alike. Wall time and peak RSS per run come from
the child's own resource usage (os.wait4).

- interpreter: `python -c pass`
- Django floor: importing Django's admin, models and URLs, which any Django command pays
- help measure: the command the README names, with our settings, apps and models

Target (issue 23): help measure ≤ 1 s and ≤ 100 MB. Not a timed test: prints figures and
the ratio to the floor measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable

COMMANDS = {
    "interpreter": [PYTHON, "-c", "pass"],
    "Django floor": [PYTHON, "-c", "import django.contrib.admin, django.db.models, django.urls"],
    "help measure": [PYTHON, "manage.py", "help", "measure"],
}


def newcomer_env() -> dict[str, str]:
    env = {name: os.environ[name] for name in ("PATH", "HOME") if name in os.environ}
    return {**env, "LANG": "C.UTF-8"}


def run_once(argv: list[str]) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one run; fails loudly if the command does."""
    started = time.perf_counter()
    child = subprocess.Popen(
        argv, cwd=ROOT, env=newcomer_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        sys.exit(f"{' '.join(argv[1:])} failed ({child.returncode}): {child.stderr.read()!r}")
    child.stderr.close()
    return seconds, usage.ru_maxrss / 1024  # ru_maxrss is in KB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    for argv in COMMANDS.values():
        run_once(argv)  # warm-up: bytecode cached, files in the page cache
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():
            samples[name].append(run_once(argv))

    medians = {name: statistics.median(s for s, _ in runs) for name, runs in samples.items()}
    print(f"{args.repeat} interleaved runs each, newcomer's environment, {ROOT}")
    print(f"{'':14} {'median':>8} {'min':>7} {'max':>7} {'peak RSS':>9} {'÷ floor':>8}")
    for name, runs in samples.items():
        seconds = [s for s, _ in runs]
        ratio = medians[name] / medians["Django floor"]
        print(
            f"{name:14} {medians[name]:7.2f}s {min(seconds):6.2f}s {max(seconds):6.2f}s "
            f"{max(mb for _, mb in runs):6.0f} MB {ratio:7.2f}×"
        )
    help_s, help_mb = medians["help measure"], max(mb for _, mb in samples["help measure"])
    verdict = "within" if help_s <= 1.0 and help_mb <= 100 else "OVER"
    print(f"help measure: {verdict} the target (≤ 1 s median, ≤ 100 MB)")


if __name__ == "__main__":
    main()
