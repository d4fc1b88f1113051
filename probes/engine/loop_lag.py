"""How late the measuring loop was while a stream was read: are we the bottleneck?

The engine stamps each read the moment the loop hands it over, so a stamp is late by
however long the loop was busy elsewhere (other streams' parsing, a thread holding the
interpreter) when the bytes arrived. That lateness cannot be seen from the stamp itself,
but a ticker can see it: a callback due every millisecond that fires `lag` late shows the
loop was held that long. While streams are being read, one ticker per loop watches them
all; each stream keeps

- ``first_ms``: the lag around its first output event (the larger of the tick that first
  saw it and the tick before) — how late its TTFT may be stamped;
- ``last_ms``: the lag of the last two ticks when its read ended — how late its last
  output event may be stamped;
- ``max_ms``: the worst lag while it was read.

`judge` turns those into the run's ``client_bound`` flag against the accuracy the
methodology promises (TTFT within 5 ms, output speed within 2 %). The ticker runs only
while a stream is watched, so an idle loop pays nothing.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Protocol

TICK_S = 0.001

# The accuracy the methodology promises (/methodology/): a run whose loop lag could have
# moved its TTFT or its output speed past these is flagged client_bound.
TTFT_BOUND_MS = 5.0
SPEED_BOUND_PCT = 2.0


class _Stamps(Protocol):
    first_output_t: int | None


@dataclass(frozen=True)
class Lag:
    first_ms: float | None
    last_ms: float
    max_ms: float


class Watch:
    """One stream's view of its loop's lag (from `watch()` until `close()`)."""

    def __init__(self, stamps: _Stamps) -> None:
        self._stamps = stamps
        self.first_ns: int | None = None
        self.max_ns = 0
        self._closed = False
        self._ticker: _Ticker | None = None

    def _on_tick(self, lag_ns: int, previous_ns: int) -> None:
        if lag_ns > self.max_ns:
            self.max_ns = lag_ns
        if self.first_ns is None and self._stamps.first_output_t is not None:
            self.first_ns = max(lag_ns, previous_ns)

    def close(self) -> Lag:
        ticker, self._ticker = self._ticker, None
        last_ns = 0
        if ticker is not None:
            last_ns = ticker.recent_ns()
            ticker.drop(self)
        if self.first_ns is None and self._stamps.first_output_t is not None:
            self.first_ns = last_ns  # the stream's first event came after the last tick
        return Lag(
            first_ms=None if self.first_ns is None else round(self.first_ns / 1e6, 3),
            last_ms=round(last_ns / 1e6, 3),
            max_ms=round(max(self.max_ns, last_ns) / 1e6, 3),
        )


class _Ticker:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._watches: set[Watch] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._due_ns = 0
        self._lag_ns = 0
        self._previous_ns = 0

    def add(self, watch: Watch) -> None:
        self._watches.add(watch)
        watch._ticker = self
        if self._handle is None:
            self._schedule()

    def drop(self, watch: Watch) -> None:
        self._watches.discard(watch)
        if not self._watches and self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def recent_ns(self) -> int:
        """The lag of the last two ticks, and of the one now overdue if it is."""
        overdue = perf_counter_ns() - self._due_ns if self._handle is not None else 0
        return max(self._lag_ns, self._previous_ns, overdue, 0)

    def _schedule(self) -> None:
        self._due_ns = perf_counter_ns() + int(TICK_S * 1e9)
        self._handle = self._loop.call_later(TICK_S, self._tick)

    def _tick(self) -> None:
        lag = max(0, perf_counter_ns() - self._due_ns)
        self._previous_ns, self._lag_ns = self._lag_ns, lag
        for watch in list(self._watches):
            watch._on_tick(lag, self._previous_ns)
        self._handle = None
        if self._watches:
            self._schedule()


_tickers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Ticker] = (
    weakref.WeakKeyDictionary()
)


def watch(stamps: _Stamps) -> Watch:
    """Start watching the running loop's lag for a stream whose recorder is `stamps`."""
    loop = asyncio.get_running_loop()
    ticker = _tickers.get(loop)
    if ticker is None:
        ticker = _tickers[loop] = _Ticker(loop)
    w = Watch(stamps)
    ticker.add(w)
    return w


def client_bound(lag: Lag, decode_ms: float | None, ranks_on_speed: bool = True) -> bool:
    """Could the loop's lag have moved this run's TTFT or output speed past the bounds?

    TTFT is stamped late by at most the lag at its first event. The output speed's span
    (first to last output event) moves by the last stamp's delay minus the first's, both
    between 0 and their ends' lags, so by at most the larger lag (not their sum); that
    matters only for a run long enough to rank on speed (`ranks_on_speed`)."""
    if lag.first_ms is None:
        return False  # no output event: no TTFT or speed to doubt
    if lag.first_ms > TTFT_BOUND_MS:
        return True
    if max(lag.first_ms, lag.last_ms) <= TICK_S * 1e3:
        return False  # within one tick: the ticker's own resolution, not a held loop
    if decode_ms and ranks_on_speed:
        return max(lag.first_ms, lag.last_ms) / decode_ms * 100 > SPEED_BOUND_PCT
    return False
