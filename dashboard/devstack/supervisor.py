"""`make run`'s supervisor: runs the app's processes with merged, prefixed output,
restarts one that crashes, and stops them all together.

`make run` is how self-hosters keep the observatory up for weeks, so a worker killed by
the OOM killer or `kill -9` is restarted after a back-off (1 s, doubling up to a minute;
back to 1 s once it has run a minute) instead of taking the site down with it. A child
that keeps crashing (CRASH_LOOP_COUNT crashes within CRASH_LOOP_WINDOW_S) is broken, not
unlucky: then everything stops with a line saying which one. Every restart is logged and
recorded in var/devstack.json, which /status reads.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dashboard.devstack.common import BASE_DIR, STOP_GRACE_S, signal_group
from dashboard.devstack.runstate import RunState, write_state

FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
# A child that ran this long before crashing starts its back-off afresh.
STABLE_AFTER_S = 60.0
CRASH_LOOP_COUNT = 5
CRASH_LOOP_WINDOW_S = 300.0

_COLORS = ["36", "32", "35", "33", "34", "31"]


def describe_exit(code: int) -> str:
    """`-9` -> 'killed by SIGKILL (-9)', `1` -> 'exit code 1'."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name} ({code})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def backoff_s(streak: int) -> float:
    """The wait before the `streak`-th restart in a row (1, 2, 4 … at most a minute)."""
    return min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** max(0, streak - 1))


@dataclass
class Child:
    name: str
    argv: list[str]
    proc: subprocess.Popen | None = None
    started_at: float = 0.0  # time.monotonic()
    crashes: deque[float] = field(default_factory=deque)  # monotonic, within the window
    streak: int = 0  # crashes since it last ran STABLE_AFTER_S
    restart_at: float | None = None  # set while waiting out a back-off
    stop_grace_s: float = STOP_GRACE_S  # from SIGTERM to SIGKILL when stopping


class CrashLoop(Exception):
    """A child crashed CRASH_LOOP_COUNT times within CRASH_LOOP_WINDOW_S."""


class Supervisor:
    """Runs child processes with merged, prefixed output; restarts crashed ones; stops
    them all together."""

    def __init__(self, env: dict[str, str], state: RunState | None = None):
        self.env = env
        self.children: list[Child] = []
        self.state = state
        self.stopping = threading.Event()
        self.stopped: list[str] = []  # names in the order stop() stopped them
        self.width = 10
        self.color = sys.stdout.isatty()
        self._lock = threading.Lock()

    def say(self, name: str, line: str) -> None:
        index = sum(map(ord, name)) % len(_COLORS)
        prefix = f"{name:<{self.width}}|"
        if self.color:
            prefix = f"\033[{_COLORS[index]}m{prefix}\033[0m"
        with self._lock:
            print(f"{prefix} {line}", flush=True)

    def start(self, name: str, argv: list[str], stop_grace_s: float = STOP_GRACE_S) -> None:
        child = Child(name, argv, stop_grace_s=stop_grace_s)
        self.children.append(child)
        self._spawn(child)

    def _spawn(self, child: Child) -> None:
        # Each child leads its own process group: stopping the group also stops its own
        # children (Celery's pool, gunicorn's workers), and a terminal Ctrl-C reaches only
        # the supervisor, which then stops everyone in order.
        child.proc = subprocess.Popen(
            child.argv,
            cwd=BASE_DIR,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            text=True,
            errors="replace",
            bufsize=1,
        )
        child.started_at = time.monotonic()
        child.restart_at = None
        threading.Thread(target=self._pump, args=(child.name, child.proc), daemon=True).start()
        self._save_state()

    def _pump(self, name: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.say(name, line.rstrip())

    def pids(self) -> list[int]:
        return [child.proc.pid for child in self.children if child.proc is not None]

    def _save_state(self) -> None:
        if self.state is not None:
            self.state.groups = self.pids()
            self.state.children = {c.name: c.proc.pid for c in self.children if c.proc}
            write_state(self.state)

    def wait(self) -> None:
        """Block until asked to stop, restarting children that crash meanwhile.

        Raises CrashLoop when one keeps crashing."""
        while not self.stopping.wait(0.2):
            now = time.monotonic()
            for child in self.children:
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        self._spawn(child)
                        self.say("devstack", f"{child.name} restarted (pid {child.proc.pid})")
                elif child.proc is not None and child.proc.poll() is not None:
                    self._crashed(child, now)

    def _crashed(self, child: Child, now: float) -> None:
        code = child.proc.returncode
        # Whatever the dead leader left in its group (a pool process) must not linger.
        signal_group(child.proc.pid, signal.SIGKILL)
        child.crashes.append(now)
        while child.crashes and child.crashes[0] < now - CRASH_LOOP_WINDOW_S:
            child.crashes.popleft()
        if len(child.crashes) >= CRASH_LOOP_COUNT:
            raise CrashLoop(
                f"{child.name} crashed {len(child.crashes)} times within "
                f"{CRASH_LOOP_WINDOW_S / 60:.0f} min (last: {describe_exit(code)}); "
                "it keeps crashing, so stopping everything — see its log lines above"
            )
        child.streak = 1 if now - child.started_at >= STABLE_AFTER_S else child.streak + 1
        wait = backoff_s(child.streak)
        child.restart_at = now + wait
        if self.state is not None:
            self.state.record_restart(child.name, datetime.now(UTC), code)
            self._save_state()
        self.say(
            "devstack",
            f"{child.name} exited unexpectedly ({describe_exit(code)}); restarting it in "
            f"{wait:.0f} s ({len(child.crashes)} crash(es) in the last "
            f"{CRASH_LOOP_WINDOW_S / 60:.0f} min; {CRASH_LOOP_COUNT} stop everything)",
        )

    def stop(self) -> None:
        """Stop the children one at a time, the last started first: beat, then the
        worker (its warm shutdown finishes the probes in flight, or is killed after its
        grace and they are abandoned, never recorded), then the web server, and only
        then the simulator they measure (stopped earlier, it cut the worker's last
        streams, stored as the demo provider's failures). The caller stops Postgres and
        Redis after this returns."""
        for child in reversed(self.children):
            self._stop_child(child)
            self.stopped.append(child.name)

    def _stop_child(self, child: Child) -> None:
        proc = child.proc
        if proc is None:
            return
        # SIGTERM to the leader only: gunicorn and Celery then stop their own workers
        # gracefully (signalling the pool directly makes Celery report lost workers).
        if proc.poll() is None:
            proc.terminate()
        try:
            proc.wait(child.stop_grace_s)
        except subprocess.TimeoutExpired:
            self.say(
                "devstack", f"{child.name} did not stop in {child.stop_grace_s:.0f} s; killing it"
            )
            proc.kill()
            proc.wait()
        # Whatever the child left in its group (pool processes) goes too.
        signal_group(proc.pid, signal.SIGKILL)
