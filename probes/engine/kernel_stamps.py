"""When bytes reached the machine: the kernel's receive stamp, on our perf_counter_ns clock.

Linux stamps every arriving segment, TCP included, once some socket asks for it with
SO_TIMESTAMPNS; ``recvmsg`` then hands over, beside the bytes, the stamp of the last
segment it read. A stamp taken in Python when the loop gets round to a read is late by
whatever held the loop or the CPU meanwhile (other streams' parsing, another process on
the core); the kernel's is not. Used by the engine's lean read path (fastread) and by the
simulator for a request's receipt. Where the option does not exist, callers keep their
own stamp.
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from time import perf_counter_ns

# Python names it on some builds only; Linux's value is 35 (asm-generic, x86, arm).
SO_TIMESTAMPNS: int | None = getattr(
    socket, "SO_TIMESTAMPNS", 35 if sys.platform == "linux" else None
)
_STAMP = struct.Struct("qq")  # struct timespec: seconds, nanoseconds (CLOCK_REALTIME)
ANCILLARY_SIZE = socket.CMSG_SPACE(_STAMP.size) if SO_TIMESTAMPNS is not None else 0
# A stamp further back than this is not a receipt we could still be reading (the wall
# clock was stepped meanwhile): the caller's own stamp is used instead.
_MAX_AGE_NS = 10_000_000_000


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp what `sock` receives; False where it cannot."""
    if SO_TIMESTAMPNS is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def arrived_ns(ancillary: list[tuple[int, int, bytes]], now_ns: int) -> int | None:
    """The receive stamp in `ancillary` (from recvmsg) on the perf_counter_ns clock, or
    None if there is none or it cannot be right. `now_ns`: perf_counter_ns() just after
    the read; the stamp is never later than it."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _STAMP.size:
            seconds, nanoseconds = _STAMP.unpack_from(data)
            # The kernel's clock is the wall clock: carried onto perf_counter_ns.
            offset = time.clock_gettime_ns(time.CLOCK_REALTIME) - perf_counter_ns()
            stamp = seconds * 1_000_000_000 + nanoseconds - offset
            if now_ns - _MAX_AGE_NS <= stamp:
                return min(stamp, now_ns)
    return None
