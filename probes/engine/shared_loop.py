"""One long-lived event loop per process, on a thread of its own, for synchronous callers
on other threads: a Celery worker's threads pool runs each probe's task body (database,
caps, ledger) in a pool thread, and every measurement of the process on this one loop.

Why one loop: the engine is asyncio already, so 64 streams on one loop cost one thread
and a few hundred kilobytes each, where a process per probe costs ~170 MB; a task waiting
for a cap waits in its own thread without touching the loop. The read path stamps bytes
as the loop hands them over (fastread.py), so what matters for accuracy is that the loop
thread is never held: nothing but measuring runs on it (task bodies and tokenizing stay
off it: tokens.count_all_async yields every slice).

    shared_loop.start()                       # once, in the worker's main process
    result = shared_loop.run(lambda: measure(req))   # from any other thread
    shared_loop.stop(grace_s=30)              # after the pool has finished its tasks

Without a started loop (a script, the web process, a prefork child), bounded.run_sync
keeps running each call on a fresh loop of its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# The backstop for a coroutine stuck outside its own limits (every measurement has a
# watchdog at its provider's total timeout): the caller's thread is freed after this.
DEFAULT_TIMEOUT_S = 1500.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_pid: int | None = None  # a forked child inherits the globals, never the thread
_timeout_s = DEFAULT_TIMEOUT_S


class LoopGone(RuntimeError):
    """The shared loop stopped (the worker is shutting down past its grace)."""


def start(timeout_s: float = DEFAULT_TIMEOUT_S) -> asyncio.AbstractEventLoop:
    """Start this process's shared loop (idempotent) and return it."""
    global _loop, _thread, _pid, _timeout_s
    with _lock:
        if running():
            return _loop  # type: ignore[return-value]
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            try:
                loop.run_forever()
            finally:
                loop.close()

        thread = threading.Thread(target=serve, name="inferwatch-measure-loop", daemon=True)
        thread.start()
        ready.wait()
        _loop, _thread, _pid, _timeout_s = loop, thread, os.getpid(), timeout_s
        return loop


def running() -> bool:
    """Whether this process has a live shared loop (a forked child has none)."""
    return (
        _loop is not None
        and _thread is not None
        and _thread.is_alive()
        and _pid == os.getpid()
        and not _loop.is_closed()
    )


def on_loop_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def run(make: Callable[[], Awaitable[T]], timeout_s: float | None = None) -> T:
    """Run the coroutine ``make()`` on the shared loop; block this thread until it ends.

    Exceptions are re-raised here. Past ``timeout_s`` (default: start's) the coroutine is
    cancelled and TimeoutError raised. Must not be called from the loop's own thread.
    """
    loop = _loop
    if loop is None or not running():
        raise LoopGone("the shared measuring loop is not running")
    if on_loop_thread():
        raise RuntimeError("shared_loop.run called from the loop's own thread")

    future = asyncio.run_coroutine_threadsafe(make(), loop)  # type: ignore[arg-type]
    try:
        return future.result(timeout=timeout_s or _timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        limit = timeout_s or _timeout_s
        raise TimeoutError(f"measurement still running after {limit:g} s") from None
    except concurrent.futures.CancelledError:
        raise LoopGone("the shared measuring loop stopped before the measurement ended") from None


def stop(grace_s: float = 5.0) -> None:
    """Let what runs on the loop finish for ``grace_s``, then cancel it and stop."""
    global _loop, _thread
    with _lock:
        loop, thread = _loop, _thread
        _loop = _thread = None
    if loop is None or thread is None or not thread.is_alive():
        return

    async def wind_down() -> None:
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if others:
            _, pending = await asyncio.wait(others, timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=1.0)
        loop.stop()

    asyncio.run_coroutine_threadsafe(wind_down(), loop)
    thread.join(timeout=grace_s + 5.0)
