"""One result per process for a short while, computed by one thread at a time.

/status runs every check (database, Redis, queues, heartbeats) and /metrics renders every
series: cheap once, costly at a flood's rate. For anonymous clients both answer from a
result at most ``ttl_s`` old, and however many ask at once, one of them computes it
(single flight): a flood costs one computation per ttl_s per process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedResult(Generic[T]):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value: T | None = None
        self._at = -float("inf")
        self.computed = 0  # how many times it was computed (tests, and curious operators)

    def get(self, ttl_s: float, compute: Callable[[], T]) -> T:
        """The last result when it is younger than ``ttl_s``, else a fresh one (0: always)."""
        if ttl_s <= 0:
            return compute()
        if time.monotonic() - self._at < ttl_s:
            return self._value  # type: ignore[return-value]
        with self._lock:  # the others wait for the one computing, then share its result
            if time.monotonic() - self._at < ttl_s:
                return self._value  # type: ignore[return-value]
            value = compute()
            self._value, self._at = value, time.monotonic()
            self.computed += 1
            return value

    def clear(self) -> None:
        with self._lock:
            self._value, self._at = None, -float("inf")
