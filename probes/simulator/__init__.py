"""The simulated provider: run it in a thread (tests), a subprocess (benchmarks) or a CLI.

with start_in_thread(Profile(tps=500)) as sim:
    measure_sync(ProbeRequest(api="openai-chat", base_url=sim.base_url, model="sim-fast"))
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .profiles import BUILTIN, FAULTS, REALISTIC_FAULTS, Profile, resolve
from .scheduler import reduce_timer_slack
from .server import ServerTraits, SimulatorServer
from .telemetry import PowerModel

__all__ = [
    "BUILTIN",
    "FAULTS",
    "REALISTIC_FAULTS",
    "PowerModel",
    "Profile",
    "SimulatorHandle",
    "SimulatorProcess",
    "ServerTraits",
    "SimulatorServer",
    "resolve",
    "start_in_process",
    "start_in_thread",
]


@dataclass
class SimulatorHandle:
    """A simulator running on its own event loop in a background thread."""

    base_url: str
    port: int
    _loop: asyncio.AbstractEventLoop = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    _server: SimulatorServer = field(repr=False)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def __enter__(self) -> SimulatorHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_in_thread(
    profile: Profile | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    traits: ServerTraits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    tokenizer: str | None = None,
) -> SimulatorHandle:
    """Start a simulator on a free port (port=0) in a daemon thread; returns at once.

    With `ssl_context` (a server context) it serves HTTPS. ``tokenizer`` makes it answer
    that server's tokenize route ("llama.cpp", "vllm", "llama-cpp-python").
    """
    server = SimulatorServer(
        profile, host, port, traits=traits, ssl_context=ssl_context, tokenizer=tokenizer
    )
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        reduce_timer_slack()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.start())
        except BaseException as exc:  # reported to the caller below
            failure.append(exc)
            ready.set()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:
            server.close()
            loop.close()

    thread = threading.Thread(target=run, name="inferwatch-simulator", daemon=True)
    thread.start()
    ready.wait(timeout=10)
    if failure:
        raise failure[0]
    return SimulatorHandle(server.base_url, server.port, loop, thread, server)


@dataclass
class SimulatorProcess:
    """A simulator in a child process, so it does not share our CPU time and GIL."""

    base_url: str
    port: int
    process: subprocess.Popen[str] = field(repr=False)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __enter__(self) -> SimulatorProcess:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def start_in_process(*args: str, host: str = "127.0.0.1", nice: int = 0) -> SimulatorProcess:
    """``python -m probes.simulator --port 0 ARGS`` in a child; returns once it listens.

    `nice`: the child's priority change, where the kernel allows it (a negative one needs
    root or CAP_SYS_NICE; refused, the child keeps ours)."""
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    process = subprocess.Popen(
        [sys.executable, "-m", "probes.simulator", "--host", host, "--port", "0", *args],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=root,
        preexec_fn=(lambda: _renice(nice)) if nice else None,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("listening on "):
        process.kill()
        raise RuntimeError(f"simulator did not start: {line!r}")
    base_url = line.split()[2]
    port = int(base_url.rsplit(":", 1)[1].split("/")[0])
    return SimulatorProcess(base_url, port, process)


def _renice(change: int) -> None:
    with contextlib.suppress(OSError):
        os.nice(change)
