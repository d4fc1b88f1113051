"""The one door out holds: no module of probes/ or dashboard/ outside the door imports an
HTTP client or a socket library, so every outbound request gets its client from
probes/engine/door.py (egress policy, pinned addresses, no redirects, bounds, bound keys).

The check reads the source (AST), so a module is caught whether or not a test imports
it; the second test proves it bites on a copy of the tree with one module added.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from tests.conftest import ROOT

# What opens connections: HTTP clients, raw sockets, SMTP.
FORBIDDEN = (
    "httpx",
    "httpcore",
    "requests",
    "urllib3",
    "aiohttp",
    "urllib.request",
    "http.client",
    "socket",
    "smtplib",
)
# Calls that open a connection without importing a client (asyncio's streams).
FORBIDDEN_CALLS = ("open_connection", "create_connection", "open_unix_connection")

# The door itself and the documented exceptions, each with why. Paths are relative to the
# repository; a directory entry covers everything below it.
ALLOWED = {
    # The door: the client factory and what it is built from.
    "probes/engine/door.py": "the one client factory",
    "probes/engine/egress.py": "the policy: reads IP literals as the resolver does (inet_aton)",
    "probes/engine/pinned.py": "the policy's pinned network backend (resolves, connects)",
    "probes/engine/bounded.py": "reads a door client's response within time and bytes",
    "probes/engine/fastread.py": "reads a door client's response from its socket (speed)",
    "probes/engine/kernel_stamps.py": "asks sockets the door opened for receive stamps",
    # Exceptions: they never send a request to an address staff or a provider chose.
    "probes/simulator/": "the simulated provider: a loopback server we run, it only listens",
    "dashboard/devstack/": "make run's supervisor: waits for its own Postgres/Redis ports",
    "dashboard/alerts/transports/email.py": (
        "SMTP to the operator's EMAIL_HOST (a setting, not staff input) via Django's mail "
        "backend; imports smtplib for its exception classes only"
    ),
}


def _allowed(relative: str) -> bool:
    return any(
        relative == path or (path.endswith("/") and relative.startswith(path)) for path in ALLOWED
    )


def _names(node: ast.AST) -> list[str]:
    """Modules a statement or call imports (by import or by name at run time)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0] if node.args else None
        if name in ("import_module", "__import__") and isinstance(first, ast.Constant):
            return [str(first.value)]
    return []


def _forbidden(module: str) -> bool:
    return any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN)


def violations(root: Path) -> list[str]:
    """`path:line: what` for every way out that is not through the door."""
    found = []
    for top in ("probes", "dashboard"):
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            if _allowed(relative):
                continue
            tree = ast.parse(path.read_text(), filename=relative)
            for node in ast.walk(tree):
                for module in _names(node):
                    if _forbidden(module):
                        found.append(f"{relative}:{node.lineno}: imports {module}")
                func = node.func if isinstance(node, ast.Call) else None
                if isinstance(func, ast.Attribute) and func.attr in FORBIDDEN_CALLS:
                    found.append(f"{relative}:{node.lineno}: calls {func.attr}")
    return found


def test_no_module_outside_the_door_imports_an_http_client_or_a_socket():
    assert violations(ROOT) == []


def test_every_allowed_path_exists():
    # A moved module must be listed where it now is, not allowed by a stale entry.
    assert [path for path in ALLOWED if not (ROOT / path).exists()] == []


def test_the_contract_fails_when_a_module_outside_the_door_imports_httpx(tmp_path):
    for top in ("probes", "dashboard"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__"))
    assert violations(tmp_path) == []

    (tmp_path / "probes" / "sneaky.py").write_text(
        '"""A feature finding its own way out."""\n\nimport httpx\n\n\n'
        "def fetch(url):\n    return httpx.get(url)\n"
    )
    (tmp_path / "dashboard" / "web" / "sneaky.py").write_text(
        "import importlib\n\nfrom urllib.request import urlopen\n"
        'sock = importlib.import_module("socket")\n'
    )
    (tmp_path / "probes" / "engine" / "sneaky.py").write_text(
        "import asyncio\n\n\nasync def go():\n"
        '    return await asyncio.open_connection("169.254.169.254", 80)\n'
    )

    assert sorted(violations(tmp_path)) == [
        "dashboard/web/sneaky.py:3: imports urllib.request",
        "dashboard/web/sneaky.py:3: imports urllib.request.urlopen",
        "dashboard/web/sneaky.py:4: imports socket",
        "probes/engine/sneaky.py:5: calls open_connection",
        "probes/sneaky.py:3: imports httpx",
    ]
