"""The garbage collector stays out of streams: collection pauses of 60-100 ms otherwise
land inside concurrent streams' timestamps. Each stream calls `enter()` before it
starts and `leave()` once it has ended: between streams (none active) we collect, freeze
the survivors out of the collector's way and disable it until the last stream ends.
"""

from __future__ import annotations

import gc
import threading

_gc_lock = threading.Lock()
_gc_active = 0
_gc_was_enabled = True
_gc_runs = 0
_FULL_COLLECT_EVERY = 50  # runs; a full collection walks every frozen object too
# A worker with many probes on one loop (shared_loop.py) may never be between streams:
# every this many starts, the young generations are collected anyway (a millisecond or
# two, not the 60-100 ms of a full pass), so cycles made meanwhile do not pile up.
_YOUNG_COLLECT_EVERY = 100
_starts_while_busy = 0


def enter() -> None:
    global _gc_active, _gc_was_enabled, _gc_runs, _starts_while_busy
    with _gc_lock:
        if _gc_active == 0:
            # Between streams: reclaim cycles, then move survivors out of the GC's way.
            # Frozen objects are skipped by gc.collect(), which keeps this cheap; now and
            # then unfreeze first so cycles among once-frozen objects are reclaimed too.
            _gc_was_enabled = gc.isenabled()
            _gc_runs += 1
            if _gc_runs % _FULL_COLLECT_EVERY == 1:
                gc.unfreeze()
            gc.collect()
            gc.freeze()
            gc.disable()
        else:
            _starts_while_busy += 1
            if _starts_while_busy % _YOUNG_COLLECT_EVERY == 0:
                gc.collect(1)
        _gc_active += 1


def leave() -> None:
    global _gc_active
    with _gc_lock:
        _gc_active -= 1
        if _gc_active == 0 and _gc_was_enabled:
            gc.enable()
