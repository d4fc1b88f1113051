"""When a request's bytes reached the machine: the kernel's receive stamp, not the loop's.

The simulator stamps each request's receipt (``x_simulator.t_request_ns``), where the true
TTFT that tests and benchmarks hold the client to begins. Stamped when the simulator's
loop gets round to the bytes, the receipt is late by however long that loop was busy
sending other streams' events (~10 ms at a 64-stream burst on two cores): the truth comes
out short, and the client looks late by the simulator's own delay.

Linux stamps every arriving segment, TCP included, once SO_TIMESTAMPNS is on; ``recvmsg``
hands over the stamp of the last segment it read (probes/engine/kernel_stamps.py). The
listening socket below gives each accepted connection a socket whose reads keep that
stamp (``arrived_ns``, on the ``perf_counter_ns`` clock the rest of the simulator uses),
so a request's receipt is the moment its last bytes arrived. Where the option does not
exist the loop's stamp stays.
"""

from __future__ import annotations

import socket
from time import perf_counter_ns

from probes.engine import kernel_stamps
from probes.engine.kernel_stamps import ANCILLARY_SIZE, SO_TIMESTAMPNS


class StampedConnection(socket.socket):
    """An accepted connection whose reads record when their bytes reached the machine."""

    arrived_ns: int | None = None

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data, ancillary, _, _ = self.recvmsg(bufsize, ANCILLARY_SIZE, flags)
        self.arrived_ns = kernel_stamps.arrived_ns(ancillary, perf_counter_ns())
        return data

    def recv_into(self, buffer, nbytes: int = 0, flags: int = 0) -> int:
        view = memoryview(buffer)
        into = [view[:nbytes] if nbytes else view]
        size, ancillary, _, _ = self.recvmsg_into(into, ANCILLARY_SIZE, flags)
        self.arrived_ns = kernel_stamps.arrived_ns(ancillary, perf_counter_ns())
        return size


class StampingListener(socket.socket):
    """A listening socket whose accepted connections are StampedConnections."""

    def accept(self) -> tuple[StampedConnection, object]:
        fd, address = self._accept()  # type: ignore[attr-defined]
        conn = StampedConnection(self.family, self.type, self.proto, fileno=fd)
        kernel_stamps.enable(conn)
        if socket.getdefaulttimeout() is None and self.gettimeout():
            conn.setblocking(True)
        return conn, address


def listener(host: str, port: int, backlog: int) -> socket.socket | None:
    """A bound, listening StampingListener; None where the kernel keeps no stamps."""
    if SO_TIMESTAMPNS is None:
        return None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = StampingListener(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # On the listener too: the kernel stamps segments only while some socket asks for
        # it, and a request often arrives before its connection is accepted.
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def arrived_ns(transport_socket) -> int | None:
    """The last read's arrival stamp of a transport's socket, if it keeps one."""
    raw = getattr(transport_socket, "_sock", transport_socket)  # asyncio's TransportSocket
    return raw.arrived_ns if isinstance(raw, StampedConnection) else None
