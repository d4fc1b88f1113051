"""A measuring process's side (measurers.py starts it): read requests from stdin, measure
each on this process's one event loop, answer on the pipe stdout was.

Three threads, one of which works: the loop. The reader unpickles requests and hands
them to the loop; the writer pickles answers and writes them, so neither pipe ever
holds the loop's turn while a stream's bytes wait to be stamped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pickle
import queue
import resource
import signal
import sys
import threading
from typing import Any, BinaryIO

from . import egress, tokens
from .client import measure as measure_one
from .client import measure_all as measure_group
from .measurers import read_frame, write_frame

NICE = -10


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    """Measure each request read from `inp` on this process's one loop; answer on `out`."""
    tokens.encoding()  # loaded before the first request, never inside anyone's stream
    go_realtime()  # after that load: a long burst of work would trip the watchdog
    loop = asyncio.new_event_loop()
    answers: queue.SimpleQueue = queue.SimpleQueue()
    policy: list[Any] = [None]

    async def job(job_id: int, shape: str, wanted: Any, payload: Any) -> None:
        if wanted != policy[0]:
            egress.configure(*wanted)
            policy[0] = wanted
        try:
            value = await (measure_group(payload) if shape == "all" else measure_one(payload))
            answers.put((job_id, True, value))
        except BaseException as exc:  # the worker decides what a failed measurement means
            answers.put((job_id, False, f"{type(exc).__name__}: {exc}"))

    def read() -> None:
        try:
            while True:
                job_id, shape, wanted, payload = read_frame(inp)
                loop.call_soon_threadsafe(loop.create_task, job(job_id, shape, wanted, payload))
        except (EOFError, OSError, ValueError, pickle.UnpicklingError):
            pass
        loop.call_soon_threadsafe(_finish)

    def _finish() -> None:
        # Input closed: the worker stopped us after its tasks ended, or it died and
        # nobody will read an answer. Streams still open are given up, not finished.
        async def wind_down() -> None:
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            if others:
                await asyncio.wait(others, timeout=2.0)
            answers.put(None)
            loop.stop()

        loop.create_task(wind_down())

    def write() -> None:
        # Pickling and pipe writes happen here, never on the loop's turn.
        while (answer := answers.get()) is not None:
            try:
                write_frame(out, answer)
            except (OSError, ValueError):
                return

    writer = threading.Thread(target=write, name="measurer-writer", daemon=True)
    writer.start()
    threading.Thread(target=read, name="measurer-reader", daemon=True).start()
    asyncio.set_event_loop(loop)
    loop.run_forever()
    writer.join(timeout=5.0)


def prioritise_group(path: str = "/proc/self/autogroup") -> bool:
    """Where the kernel schedules by session (autogroup), a process's nice counts only
    inside its session's group, and groups share the CPU as equals: measured beside
    `make run` on a busy 2-core machine, a nice −10 child still waited for a core
    through every hold its runs were flagged for (loop lag ≈ run-queue wait, its own CPU
    and the GC ~0). The child has a session of its own (measurers.py); this gives that
    group the same priority, where the kernel allows it (root, CAP_SYS_NICE)."""
    try:
        with open(path, "w") as group:
            group.write(str(NICE))
        return True
    except OSError:  # no autogroup (a kernel without it, a container), or not allowed
        return False


# The loop's thread under the kernel's realtime round-robin at its lowest priority, where
# allowed: measured beside `make run` on the busy 2-core VM, with its own group at nice −10
# 5 % of runs were still client-bound (holds were waits for a core); realtime, 0 of 102.
RT_PRIORITY = 1
# A realtime thread that runs this long without blocking is spinning, not reading: at
# the soft limit it leaves realtime (SIGXCPU), at the hard one the kernel ends the process
# (the worker measures its streams again), so a bug cannot take the machine's cores.
RT_SOFT_S, RT_HARD_S = 0.2, 1.0


def go_realtime() -> bool:
    """Realtime for this thread only (threads started later reset to the normal policy:
    SCHED_RESET_ON_FORK), with the RLIMIT_RTTIME watchdog; False where not allowed."""
    try:
        policy = os.SCHED_RR | os.SCHED_RESET_ON_FORK
        os.sched_setscheduler(0, policy, os.sched_param(RT_PRIORITY))
    except (OSError, AttributeError):  # not root/CAP_SYS_NICE, or not Linux
        return False
    signal.signal(signal.SIGXCPU, _leave_realtime)
    limit = (int(RT_SOFT_S * 1e6), int(RT_HARD_S * 1e6))
    with contextlib.suppress(OSError, ValueError, AttributeError):
        resource.setrlimit(resource.RLIMIT_RTTIME, limit)
    return True


def _leave_realtime(signum: int, frame: Any) -> None:
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def main() -> None:
    # The worker's warm shutdown decides when measuring ends: Ctrl-C reaches the whole
    # process group, and a child that died on it would fail the streams in its grace.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Ahead of the worker's task threads and the rest of the machine when the kernel
    # allows it (root, CAP_SYS_NICE): a stamp is late by however long the loop waited
    # for a core after the bytes arrived. Elsewhere the child runs at the worker's
    # priority, and its runs' loop lag says whether that was enough.
    with contextlib.suppress(OSError):
        os.nice(NICE)
    prioritise_group()
    # The frames get stdout's pipe to themselves: anything printed goes to stderr.
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, frames)


if __name__ == "__main__":
    main()
