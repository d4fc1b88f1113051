"""The one door out holds: no module of probes/ or dashboard/ outside the door imports an
HTTP client, a socket or stream library, mail, a process or a library that fetches on its
own, or calls one of their ways out (pyproject's import-linter contract "one door out"
names the installed libraries too), so every outbound request gets its client from
probes/engine/door.py (egress policy, pinned addresses, no redirects, bounds, bound keys).

The check reads the source (AST), so a module is caught whether or not a test imports
it; the second test proves it bites on a copy of the tree with one module added.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from tests.conftest import ROOT

# What opens connections: HTTP clients, raw sockets and streams, mail, other protocols,
# processes (a child can open what it likes), and libraries that fetch on their own
# (jsonschema resolves a remote $ref with urllib unless given a registry).
FORBIDDEN = (
    "httpx",
    "httpcore",
    "requests",
    "urllib3",
    "aiohttp",
    "anyio",
    "urllib.request",
    "http.client",
    "socket",
    "asyncio.streams",
    "smtplib",
    "django.core.mail",
    "ftplib",
    "poplib",
    "imaplib",
    "nntplib",
    "telnetlib",
    "xmlrpc.client",
    "multiprocessing.connection",
    "webbrowser",
    "subprocess",
    "jsonschema",
    "referencing",
)
# Calls that open a connection (or a process) whatever was imported for them: asyncio's
# and anyio's streams, a client or transport constructed by hand (``door.AsyncClient()`` is
# httpx's own, without the policy), urllib's fetches, Django's mail, os's processes.
FORBIDDEN_CALLS = (
    "open_connection",
    "open_unix_connection",
    "create_connection",
    "create_unix_connection",
    "create_datagram_endpoint",
    "start_server",
    "start_unix_server",
    "create_server",
    "sock_connect",
    "connect_tcp",
    "connect_unix",
    "create_subprocess_exec",
    "create_subprocess_shell",
    "AsyncClient",
    "Client",
    "AsyncHTTPTransport",
    "HTTPTransport",
    "AsyncConnectionPool",
    "ConnectionPool",
    "urlopen",
    "urlretrieve",
    "send_mail",
    "send_mass_mail",
    "mail_admins",
    "mail_managers",
    "get_connection",
)
FORBIDDEN_OS_CALLS = ("system", "popen", "posix_spawn", "posix_spawnp", "fork", "forkpty")
FORBIDDEN_OS_PREFIXES = ("exec", "spawn")

# The door itself and the documented exceptions, each with why and, for an exception, the
# only ways out it may use (None: any). Paths are relative to the repository; a directory
# entry covers everything below it.
ALLOWED: dict[str, tuple[str, tuple[str, ...] | None]] = {
    # The door: the client factory and what it is built from.
    "probes/engine/door.py": ("the one client factory", None),
    "probes/engine/egress.py": ("the policy: reads IP literals like the resolver", ("socket",)),
    "probes/engine/pinned.py": ("the policy's pinned network backend (resolves, connects)", None),
    "probes/engine/bounded.py": ("reads a door client's response within time and bytes", None),
    "probes/engine/fastread.py": ("reads a door client's response from its socket", None),
    "probes/engine/kernel_stamps.py": ("asks the door's sockets for receive stamps", ("socket",)),
    # Exceptions: they never send a request to an address staff or a provider chose.
    "probes/simulator/": ("the simulated provider: a loopback server we run, it listens", None),
    "dashboard/devstack/": ("make run's supervisor: starts and waits for its own servers", None),
    "dashboard/alerts/transports/email.py": (
        "SMTP to the operator's EMAIL_HOST (a setting, not staff input) via Django's mail "
        "backend; imports smtplib for its exception classes only",
        ("smtplib", "django.core.mail", "send_mail"),
    ),
    "probes/engine/measurers.py": (
        "starts our own measurer child (sys.executable, a fixed command), no network",
        ("subprocess",),
    ),
    "probes/kinds/schemas.py": (
        "validates with a referencing registry that retrieves nothing (remote refs refused)",
        ("jsonschema", "referencing"),
    ),
}


def _allowance(relative: str) -> tuple[str, ...] | None | bool:
    """What `relative` may use: None (anything), a tuple, or False (nothing)."""
    for path, (_why, ways) in ALLOWED.items():
        if relative == path or (path.endswith("/") and relative.startswith(path)):
            return ways
    return False


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


def _forbidden(module: str) -> str | None:
    return next((bad for bad in FORBIDDEN if module == bad or module.startswith(bad + ".")), None)


def _call(node: ast.AST) -> str | None:
    """The forbidden call `node` makes, or None."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in FORBIDDEN_CALLS:
        return name
    owner = func.value if isinstance(func, ast.Attribute) else None
    is_os = isinstance(owner, ast.Name) and owner.id == "os"
    if is_os and (name in FORBIDDEN_OS_CALLS or name.startswith(FORBIDDEN_OS_PREFIXES)):
        return f"os.{name}"
    return None


def _permitted(ways: tuple[str, ...] | None | bool, what: str) -> bool:
    if ways is None:
        return True
    return bool(ways) and any(what == w or what.startswith(w + ".") for w in ways)


def violations(root: Path) -> list[str]:
    """`path:line: what` for every way out that is not through the door."""
    found = []
    for top in ("probes", "dashboard"):
        for path in sorted((root / top).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            ways = _allowance(relative)
            if ways is None:
                continue
            tree = ast.parse(path.read_text(), filename=relative)
            for node in ast.walk(tree):
                for module in _names(node):
                    if _forbidden(module) and not _permitted(ways, _forbidden(module)):
                        found.append(f"{relative}:{node.lineno}: imports {module}")
                call = _call(node)
                if call and not _permitted(ways, call):
                    found.append(f"{relative}:{node.lineno}: calls {call}")
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

    # The ways out the first version of this check missed (issue 33).
    (tmp_path / "probes" / "kinds" / "sneaky.py").write_text(
        "import anyio\nimport jsonschema\nfrom probes.engine import door\n\n\n"
        "async def go(schema):\n"
        "    jsonschema.validate({}, schema)\n"
        "    await anyio.connect_tcp('10.0.0.1', 80)\n"
        "    return door.AsyncClient()\n"
    )
    (tmp_path / "dashboard" / "alerts" / "sneaky.py").write_text(
        "import os\nimport subprocess\n\nfrom django.core import mail\n\n\n"
        "def go():\n"
        "    subprocess.run(['curl', 'http://10.0.0.1'])\n"
        "    os.system('curl http://10.0.0.1')\n"
        "    mail.send_mail('s', 'b', 'a@b', ['c@d'])\n"
    )
    # An exception may use only what it is listed for.
    measurers_lines = len((tmp_path / "probes/engine/measurers.py").read_text().splitlines())
    with (tmp_path / "probes" / "engine" / "measurers.py").open("a") as tail:
        tail.write("\nimport socket  # noqa\n")

    assert sorted(violations(tmp_path)) == sorted(
        [
            "dashboard/alerts/sneaky.py:10: calls send_mail",
            "dashboard/alerts/sneaky.py:2: imports subprocess",
            "dashboard/alerts/sneaky.py:4: imports django.core.mail",
            "dashboard/alerts/sneaky.py:9: calls os.system",
            "dashboard/web/sneaky.py:3: imports urllib.request",
            "dashboard/web/sneaky.py:3: imports urllib.request.urlopen",
            "dashboard/web/sneaky.py:4: imports socket",
            f"probes/engine/measurers.py:{measurers_lines + 2}: imports socket",
            "probes/engine/sneaky.py:5: calls open_connection",
            "probes/kinds/sneaky.py:1: imports anyio",
            "probes/kinds/sneaky.py:2: imports jsonschema",
            "probes/kinds/sneaky.py:8: calls connect_tcp",
            "probes/kinds/sneaky.py:9: calls AsyncClient",
            "probes/sneaky.py:3: imports httpx",
        ]
    )
