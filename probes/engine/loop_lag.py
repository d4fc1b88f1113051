"""How late the measuring loop was while a stream was read: are we the bottleneck?

A stamp taken as the loop hands a read over is late by however long the loop was busy
elsewhere (other streams' parsing, a thread holding the interpreter) when the bytes
arrived. The kernel's receive stamp (fastread) is not, but events that queued unread
while the loop was held come out under the latest one's stamp, so an earlier event's
stamp is late by at most how long the loop was held *before that stamp*. Either way the
error is bounded by the hold before the stamp, which the stamp itself cannot show, but a
ticker can: a callback due every millisecond that fires `lag` late shows the loop was
held that long. A hold after the kernel stamped the bytes (our read came late, the
stamp did not) is not counted: it moved no stamp. While streams are being read, one
ticker per loop watches them all; each stream keeps

- ``first_ms``: how long the loop may have been held just before its first output
  event's stamp — how late its TTFT may be;
- ``last_ms``: the same for its last output event;
- ``max_ms``: the worst lag while it was read.

"Just before a stamp" is each tick due before it, late by the stamp's time at most: work
after the stamp (closing the response, another stream's tokenizing) never delayed it,
and a tick late only from the selector's millisecond rounding on an idle loop, while a
socket woke the loop at once, does not count as a hold either.

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
    # The first and last output events' stamps (the kernel's where it gives them).
    first_output_t: int | None
    last_output_t: int | None


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
        self._ticker: _Ticker | None = None
        # The last output event's stamp as of the latest tick, and the ticks around it
        # then (the ticker keeps only its last few; a provider may pause for many ticks
        # between its last token and the end of the stream).
        self._last_t: int | None = None
        self._ticks_at_last: _Ticks = ()

    def _on_tick(self, lag_ns: int, ticks: _Ticks) -> None:
        if lag_ns > self.max_ns:
            self.max_ns = lag_ns
        stamps = self._stamps
        if self.first_ns is None and stamps.first_output_t is not None:
            self.first_ns = _held_before(stamps.first_output_t, ticks)
        if stamps.last_output_t != self._last_t:  # cheap: once a tick, for every stream
            self._last_t, self._ticks_at_last = stamps.last_output_t, ticks

    def close(self) -> Lag:
        ticker, self._ticker = self._ticker, None
        t_first, t_last = self._stamps.first_output_t, self._stamps.last_output_t
        last_ns = 0
        if ticker is not None:
            now = ticker.ticks_now()  # with the tick due but not yet fired
            self.max_ns = max(self.max_ns, ticker.overdue_ns())  # a hold not yet ticked
            if self.first_ns is None and t_first is not None:
                self.first_ns = _held_before(t_first, now)
            if t_last is not None:
                # Stamped since the latest tick: the ticks now; else those around it then.
                last_ns = _held_before(
                    t_last, now if t_last != self._last_t else self._ticks_at_last
                )
            ticker.drop(self)
        return Lag(
            first_ms=None if self.first_ns is None else round(self.first_ns / 1e6, 3),
            last_ms=round(last_ns / 1e6, 3),
            max_ms=round(max(self.max_ns, last_ns, self.first_ns or 0) / 1e6, 3),
        )


# Recent ticks as (due, fired) perf_counter_ns pairs, oldest first.
_Ticks = tuple[tuple[int, int], ...]


def _held_before(t_ns: int, ticks: _Ticks) -> int:
    """How long the loop may have been held just before `t_ns` (a stamp): of the two
    ticks due last before the stamp, how late each was by the stamp (a tick that fired
    after the stamp counts only up to it: the work after the stamp never delayed it)."""
    before = [(due, fired) for due, fired in ticks if due <= t_ns][-2:]
    return max((min(fired, t_ns) - due for due, fired in before), default=0)


class _Ticker:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._watches: set[Watch] = set()
        self._handle: asyncio.TimerHandle | None = None
        self._due_ns = 0
        self._ticks: _Ticks = ()  # the last three fired

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

    def ticks_now(self) -> _Ticks:
        """The last ticks fired and, if one is due and has not fired, that one as if it
        fired now (it is late by now at least)."""
        if self._handle is None:
            return self._ticks
        return (*self._ticks, (self._due_ns, perf_counter_ns()))

    def overdue_ns(self) -> int:
        """How late the tick due now is, if it has not fired."""
        return max(0, perf_counter_ns() - self._due_ns) if self._handle is not None else 0

    def _schedule(self) -> None:
        self._due_ns = perf_counter_ns() + int(TICK_S * 1e9)
        self._handle = self._loop.call_later(TICK_S, self._tick)

    def _tick(self) -> None:
        fired = perf_counter_ns()
        self._handle = None
        self._ticks = ticks = (*self._ticks[-2:], (self._due_ns, fired))
        lag = max(0, fired - self._due_ns)
        for watch in list(self._watches):
            watch._on_tick(lag, ticks)
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
