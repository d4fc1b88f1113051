"""The repository is whole on its own: a fresh clone with nothing beside it runs and tests.

No file reads, imports or links a path outside the repository (the project's notes that
lived beside it, `../shared`, are not shipped with a clone).
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT
from tests.probes.engine.replay import FIXTURES

# Made on the machine, never in a clone.
SKIPPED_DIRS = {".git", ".venv", "var", "staticfiles", "node_modules", "test-artifacts"}
OUTSIDE = re.compile(
    r"\.\./shared|/work/shared|\bshared/(metrics|design|style|client-accuracy)\.md|shared/fixtures"
)


def _repository_files():
    for path in ROOT.rglob("*"):
        parts = set(path.relative_to(ROOT).parts)
        if (
            path.is_file()
            and not parts & SKIPPED_DIRS
            and not any(p.endswith((".egg-info", "_cache", "__pycache__")) for p in parts)
        ):
            yield path


def test_nothing_refers_to_a_path_outside_the_repository():
    offenders = []
    for path in _repository_files():
        if path == Path(__file__).resolve():
            continue  # the pattern itself
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue  # images, vendored minified assets
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert offenders == []


def test_the_sse_fixtures_ship_with_the_repository():
    assert FIXTURES.is_relative_to(ROOT)
    assert (FIXTURES / "README.md").is_file()
    assert len(list(FIXTURES.glob("*.sse"))) >= 29
