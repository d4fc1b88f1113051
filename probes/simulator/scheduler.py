"""Emits each simulated stream's events on time.

Output event ``i`` is due at ``t_request + ttft + i * k / tps`` (``perf_counter_ns``, the
same system-wide monotonic clock the client reads). One scheduler per event loop owns a
heap of deadlines: it lets the loop sleep when the next deadline is far, and closes the
last stretch with ``time.sleep`` (timer slack reduced to 1 ns), because asyncio's epoll
timeout has a 1 ms resolution and 4,200 tok/s needs one token every 0.24 ms.
"""

from __future__ import annotations

import asyncio
import ctypes
import heapq
import itertools
import time
from time import perf_counter_ns
from typing import Protocol


class Emitter(Protocol):
    """What the scheduler calls (stream.py's Stream; a protocol, so the scheduler does not
    import the streams the server hands it)."""

    def emit(self) -> int | None:
        """Write what is due; the next deadline (perf_counter_ns), or None when done."""


_FAR_NS = 2_000_000  # beyond this, let the event loop sleep...
_MARGIN_NS = 1_500_000  # ...and wake this early to finish with a precise sleep


def reduce_timer_slack() -> None:
    """Linux: make short sleeps precise (default slack is 50 us) for this thread."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(29, 1, 0, 0, 0)  # PR_SET_TIMERSLACK = 29
    except (OSError, AttributeError):
        pass


class Scheduler:
    """Calls ``stream.emit()`` at each stream's next deadline."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.heap: list[tuple[int, int, Emitter]] = []
        self._seq = itertools.count()
        self._handle: asyncio.Handle | None = None
        self._handle_due = 0

    def add(self, stream: Emitter, deadline: int) -> None:
        heapq.heappush(self.heap, (deadline, next(self._seq), stream))
        if self._handle is None or deadline < self._handle_due:
            if self._handle is not None:
                self._handle.cancel()
            self._schedule(deadline)

    def _schedule(self, deadline: int) -> None:
        self._handle_due = deadline
        wait = deadline - perf_counter_ns()
        if wait > _FAR_NS:
            self._handle = self.loop.call_later((wait - _MARGIN_NS) / 1e9, self._tick)
        else:
            self._handle = self.loop.call_soon(self._tick)

    def _tick(self) -> None:
        self._handle = None
        heap = self.heap
        if heap:
            wait = heap[0][0] - perf_counter_ns()
            if 0 < wait <= _FAR_NS:
                time.sleep(wait / 1e9)  # precise; blocks the loop for < 2 ms
        now = perf_counter_ns()
        while heap and heap[0][0] <= now:
            _, seq, stream = heapq.heappop(heap)
            nxt = stream.emit()
            if nxt is not None:
                heapq.heappush(heap, (nxt, seq, stream))
            now = perf_counter_ns()
        if heap:
            # Return to the loop between rounds so it can read requests and closes.
            self._schedule(heap[0][0])
