"""Measuring processes: every stream read where nothing else runs.

Why: a threads-pool worker runs its task bodies (Django, the ledger, the caps, the
recorder, tokenizing) in threads of one interpreter. On a shared loop in that interpreter
(shared_loop.py) a burst's first bytes wait for the interpreter behind 64 task threads,
and their stamps come late: bench_capacity measured TTFT within 5 ms for only 75 % of a
64-wide burst. A measuring process has an interpreter of its own whose one thread of
work is its event loop, so bytes are stamped where they arrive. The engine has no
Django, so a child needs nothing but this package.

The worker keeps the task bodies. `measure(req)` (or a parallel group's `measure_all`)
sends the request to the child with the fewest streams in flight and blocks the calling
thread until the RunResult comes back; a child per core (WORKER_MEASURING_PROCESSES).
CLOCK_MONOTONIC is one clock for every process of the machine, so perf_counter stamps
(t0_ns) mean the same in the child and the worker.

Frames on the pipes are a 4-byte length and a pickle, between the worker and children it
started itself: a provider's bytes are parsed in the child and cross only as the
RunResult's fields. A child ignores SIGINT/SIGTERM (the worker's warm shutdown decides
when measuring ends) and exits when its input closes: when the worker stops it (its
tasks have ended by then), or dies (nobody is left to read an answer).

Without started children (prefork, a script, a process that could not start one), the
callers keep measuring on the shared loop or a fresh loop, as before (client.py).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import itertools
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, BinaryIO

from . import egress

_ROOT = Path(__file__).resolve().parents[2]  # where `probes` is importable from
_HEADER = 4


class MeasurerGone(RuntimeError):
    """The measuring process ended before it answered (it died, or was stopped)."""


def write_frame(out: BinaryIO, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(len(data).to_bytes(_HEADER, "big") + data)
    out.flush()


def read_frame(inp: BinaryIO) -> Any:
    header = inp.read(_HEADER)
    if len(header) < _HEADER:
        raise EOFError
    size = int.from_bytes(header, "big")
    data = inp.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)  # noqa: S301 (our own child's frames, see the docstring)


# -- the worker's side ----------------------------------------------------------------------


class _Child:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            # Not `-m`: the package imports this module first, and a second copy as
            # __main__ would be a different module.
            [sys.executable, "-c", "from probes.engine.measurer_child import main; main()"],
            cwd=_ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            # A session of its own is a scheduling group of its own where the kernel
            # groups by session (autogroup, most desktop and server kernels): the child
            # gets a group's share of the CPU and a group's priority, instead of sharing
            # the worker's group with its 64 task threads (measurer_child.main).
            start_new_session=True,
        )
        self.streams = 0  # in flight, a parallel group counting its requests
        self._pending: dict[int, tuple[concurrent.futures.Future, int]] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="measurer-reader", daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return self.proc.poll() is None and self._reader.is_alive()

    def submit(self, job_id: int, shape: str, payload: Any, streams: int):
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if not self.alive():
                raise MeasurerGone("the measuring process is not running")
            self._pending[job_id] = (future, streams)
            self.streams += streams
            try:
                write_frame(self.proc.stdin, (job_id, shape, _policy(), payload))  # type: ignore[arg-type]
            except (OSError, ValueError):
                self._pending.pop(job_id, None)
                self.streams -= streams
                raise MeasurerGone("the measuring process stopped reading") from None
        return future

    def _read(self) -> None:
        try:
            while True:
                job_id, ok, value = read_frame(self.proc.stdout)  # type: ignore[arg-type]
                with self._lock:
                    future, streams = self._pending.pop(job_id, (None, 0))
                    self.streams -= streams
                if future is None:
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(RuntimeError(value))
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            pass
        finally:
            with self._lock:
                pending, self._pending = self._pending, {}
                self.streams = 0
            for future, _ in pending.values():
                future.set_exception(MeasurerGone("the measuring process ended mid-run"))

    def stop(self, grace_s: float) -> None:
        with contextlib.suppress(OSError):
            self.proc.stdin.close()  # type: ignore[union-attr]
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _policy() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The egress policy as configured in this process, for the child to apply too."""
    policy = egress.current()
    return tuple(map(str, policy.deny)), tuple(map(str, policy.allow))


_lock = threading.Lock()
_children: list[_Child] = []
_pid: int | None = None
_ids = itertools.count(1)


def start(processes: int) -> int:
    """Start `processes` measuring children (idempotent); how many run. Starting may
    fail (no fork, no memory): the callers then keep measuring in this process."""
    global _pid
    with _lock:
        if _pid != os.getpid():
            _children.clear()  # a forked child inherits the list, never the processes
            _pid = os.getpid()
        while len([c for c in _children if c.alive()]) < processes:
            try:
                _children.append(_Child())
            except OSError:
                break
        _children[:] = [c for c in _children if c.alive()]
        return len(_children)


def running() -> bool:
    return _pid == os.getpid() and any(c.alive() for c in _children)


def _least_busy(n: int = 1) -> list[_Child]:
    """Up to `n` live children, the least busy first."""
    with _lock:
        live = [c for c in _children if c.alive()] if _pid == os.getpid() else []
    if not live:
        raise MeasurerGone("no measuring process is running")
    return sorted(live, key=lambda c: c.streams)[:n]


def _wait(future: concurrent.futures.Future, timeout_s: float) -> Any:
    try:
        return future.result(timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"measurement still running after {timeout_s:g} s") from None


def measure(req, timeout_s: float = 1500.0):
    """``client.measure(req)`` in a measuring process; MeasurerGone if none answers."""
    (child,) = _least_busy()
    return _wait(child.submit(next(_ids), "one", req, 1), timeout_s)


def measure_all(reqs: list, timeout_s: float = 1500.0) -> list:
    """``client.measure_all(reqs)``, the group shared among the measuring processes: each
    starts its share at once (a wide sweep step is more than one loop reads on time)."""
    children = _least_busy(len(reqs))
    shares = [reqs[i :: len(children)] for i in range(len(children))]
    futures = [
        child.submit(next(_ids), "all", share, len(share))
        for child, share in zip(children, shares, strict=True)
    ]
    answers = [_wait(future, timeout_s) for future in futures]
    results: list = [None] * len(reqs)
    for i, answer in enumerate(answers):
        results[i :: len(children)] = answer
    return results


def stop(grace_s: float = 5.0) -> None:
    """Close every child's input: each gives up what it still streams and exits (killed
    past grace_s). Called after the pool's tasks have ended."""
    with _lock:
        children, _children[:] = list(_children), []
    for child in children:
        child.stop(grace_s)
