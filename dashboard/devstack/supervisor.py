"""`make run`'s supervisor: runs the app's processes with merged, prefixed output and
stops them all together."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

from dashboard.devstack.common import BASE_DIR, STOP_GRACE_S, signal_group

_COLORS = ["36", "32", "35", "33", "34", "31"]


class Supervisor:
    """Runs child processes with merged, prefixed output; stops them all together."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.children: list[tuple[str, subprocess.Popen]] = []
        self.stopping = threading.Event()
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

    def start(self, name: str, argv: list[str]) -> None:
        # Each child leads its own process group: stopping the group also stops its own
        # children (Celery's pool, gunicorn's workers), and a terminal Ctrl-C reaches only
        # the supervisor, which then stops everyone in order.
        proc = subprocess.Popen(
            argv,
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
        self.children.append((name, proc))
        threading.Thread(target=self._pump, args=(name, proc), daemon=True).start()

    def _pump(self, name: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.say(name, line.rstrip())

    def pids(self) -> list[int]:
        return [proc.pid for _, proc in self.children]

    def wait(self) -> str | None:
        """Block until asked to stop or a child dies; returns the dead child's name."""
        while not self.stopping.wait(0.2):
            for name, proc in self.children:
                if proc.poll() is not None:
                    return name
        return None

    def stop(self) -> None:
        # SIGTERM to each leader only: gunicorn and Celery then stop their own workers
        # gracefully (signalling the pool directly makes Celery report lost workers).
        for _, proc in reversed(self.children):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for name, proc in reversed(self.children):
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say("devstack", f"{name} did not stop in {STOP_GRACE_S:.0f} s; killing it")
                proc.kill()
                proc.wait()
            # Whatever the child left in its group (pool processes) goes too.
            signal_group(proc.pid, signal.SIGKILL)
