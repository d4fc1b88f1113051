"""The machine's tools some tests drive (Debian's chromium, prometheus and promtool), looked
up on PATH as `make test` and .ci/debian-packages look them up.

A missing tool skips its tests on a developer's machine (with the command that installs
it), but fails them in CI (CI set): there `make test` installs every tool first, so a
missing one is a broken set-up, never a reason to run fewer tests.
"""

from __future__ import annotations

import os
import shutil

import pytest

# The Debian package each tool comes from.
PACKAGES = {"chromium": "chromium", "prometheus": "prometheus", "promtool": "prometheus"}


def require(tool: str) -> str:
    """The tool's path; else a skip, or in CI a failure."""
    path = shutil.which(tool)
    if path:
        return path
    install = f"apt-get install --no-install-recommends {PACKAGES[tool]}"
    if os.environ.get("CI"):
        pytest.fail(f"{tool} is not on PATH, and CI runs every test (`make test` runs: {install})")
    pytest.skip(f"{tool} is not installed (`make test` installs it as root, or: {install})")
