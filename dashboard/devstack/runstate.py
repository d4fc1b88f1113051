"""var/devstack.json: what a running `make run` started, for `make stop` and /status.

It names the supervisor and its children's process groups (so `make stop` can clean up
after a killed run) and each restart of a crashed child (so /status can say that the
worker was restarted, when, and why: a self-hoster rarely reads weeks of log).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from dashboard.devstack.common import alive, var_dir

# Per child; older restarts only count towards its total.
RESTARTS_KEPT = 20


@dataclass
class Restart:
    at: str  # ISO 8601, UTC
    exit_code: int  # negative: killed by that signal (subprocess's convention)


@dataclass
class RunState:
    supervisor: int
    started_at: str
    groups: list[int] = field(default_factory=list)
    children: dict[str, int] = field(default_factory=dict)  # name: pid of the running one
    restarts: dict[str, list[Restart]] = field(default_factory=dict)
    restart_counts: dict[str, int] = field(default_factory=dict)

    def record_restart(self, name: str, at: datetime, exit_code: int) -> None:
        kept = self.restarts.setdefault(name, [])
        kept.append(Restart(at.isoformat(), exit_code))
        del kept[:-RESTARTS_KEPT]
        self.restart_counts[name] = self.restart_counts.get(name, 0) + 1


def state_path() -> Path:
    return var_dir() / "devstack.json"


def write_state(state: RunState) -> None:
    # Via a temporary file and a rename: a reader (/status) never sees half a file.
    path = state_path()
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(asdict(state)))
    os.replace(temporary, path)


def read_state(path: Path | None = None) -> RunState | None:
    """The running `make run`'s state; None without one (or if it is unreadable)."""
    path = path or state_path()
    try:
        raw = json.loads(path.read_text())
        restarts = {
            name: [Restart(**r) for r in rows] for name, rows in raw.get("restarts", {}).items()
        }
        return RunState(
            supervisor=int(raw["supervisor"]),
            started_at=raw.get("started_at", ""),
            groups=[int(pid) for pid in raw.get("groups", [])],
            children={name: int(pid) for name, pid in raw.get("children", {}).items()},
            restarts=restarts,
            restart_counts={k: int(v) for k, v in raw.get("restart_counts", {}).items()},
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def running_state() -> RunState | None:
    """The state of a `make run` whose supervisor is still alive, else None."""
    state = read_state()
    return state if state is not None and alive(state.supervisor) else None
