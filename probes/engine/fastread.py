"""The lean read path: after httpx has connected, sent the request and parsed the
response headers, we take the connection's asyncio transport over and read the body in
a ``Protocol.data_received`` callback.

Why: httpx's async byte iterators go through httpcore, h11 and anyio, and anyio pauses
and resumes the transport around every read (two ``epoll_ctl`` system calls). With one
event per read - 16 streams at 2,100 tok/s is 33,600 reads/s - that per-read cost, not
parsing, is what makes a client fall behind (measured on our VM: ~120 us CPU per read
via ``aiter_raw`` on an idle stream). In the callback there is no coroutine to wake and
no extra system call: the timestamp is taken as the loop hands us the bytes, and the SSE
parser runs right there.

Where the kernel keeps receive stamps (Linux, kernel_stamps.py) we read the socket
ourselves with ``recvmsg`` in a reader callback instead of the transport's ``recv``, and
each read carries the moment its last segment reached the machine: a loop or a CPU busy
elsewhere delays our read, no longer its stamp. The limit: segments that queue up
unread are merged in the kernel's receive queue under the latest one's stamp, so the
stamp is exact for a hold shorter than the gap to the provider's next event (6.7 ms at
150 tok/s) and never later than the read. The loop-lag judge bounds that error by how
long the loop was held before the stamp (loop_lag.py).

It relies on private attributes of httpcore, h11 and anyio (checked at run time): when
they do not match (another version, HTTP/2, a proxy, compression), ``take_over`` returns
None and the caller uses ``response.aiter_raw()`` instead. The connection is closed
after the body, never returned to the pool.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Callable
from time import perf_counter_ns
from typing import Any

import httpx

from . import kernel_stamps

# (bytes, when they reached the machine): perf_counter_ns
Feed = Callable[[bytes, int], None]
_READ_SIZE = 256 * 1024  # as asyncio's own socket transport reads


class BodyError(Exception):
    """Malformed chunked framing."""


class ResponseTooLarge(Exception):
    """The body passed Limits.max_response_bytes (either read path raises it)."""


class ChunkedDecoder:
    """Incremental ``Transfer-Encoding: chunked`` decoder (RFC 9112 section 7.1)."""

    __slots__ = ("_buf", "_left", "_state", "done")

    def __init__(self) -> None:
        self._buf = b""
        self._left = 0  # data bytes left in the current chunk
        self._state = 0  # 0 size line, 1 data, 2 CRLF after data, 3 trailers
        self.done = False

    def decode(self, data: bytes) -> bytes:
        buf = self._buf + data if self._buf else data
        out: list[bytes] = []
        pos, n = 0, len(buf)
        while pos < n and not self.done:
            state = self._state
            if state == 1:
                take = min(self._left, n - pos)
                out.append(buf[pos : pos + take])
                pos += take
                self._left -= take
                if self._left == 0:
                    self._state = 2
            elif state == 2:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise BodyError("chunk data not followed by CRLF")
                pos += 2
                self._state = 0
            else:
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    if n - pos > 4096:
                        raise BodyError("chunk size line too long")
                    break
                line = buf[pos:end]
                pos = end + 2
                if state == 3:  # trailer section ends with an empty line
                    if not line:
                        self.done = True
                    continue
                try:
                    size = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    raise BodyError(f"bad chunk size line {line[:40]!r}") from None
                if size == 0:
                    self._state = 3
                else:
                    self._left = size
                    self._state = 1
        self._buf = buf[pos:] if pos < n else b""
        if len(out) == 1:
            return out[0]
        return b"".join(out)


def _find_h11(response: httpx.Response) -> Any:
    """The h11.Connection behind an httpx response (httpx 0.28 / httpcore 1.x)."""
    obj: Any = response.stream
    for _ in range(6):
        conn = getattr(obj, "_connection", None)
        if conn is not None:
            return getattr(conn, "_h11_state", None)
        obj = getattr(obj, "_stream", None) or getattr(obj, "_httpcore_stream", None)
        if obj is None:
            return None
    return None


class _BodyProtocol(asyncio.Protocol):
    def __init__(self, reader: FastBodyReader) -> None:
        self.reader = reader

    def data_received(self, data: bytes) -> None:
        self.reader.on_data(data, perf_counter_ns())

    def eof_received(self) -> bool:
        self.reader.on_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.reader.on_lost(exc)


class FastBodyReader:
    """Reads one response body through a transport it took over from anyio."""

    def __init__(
        self,
        transport: asyncio.Transport,
        feed: Feed,
        should_stop: Callable[[], bool],
        chunked: bool,
        length: int | None,
        max_bytes: int,
        ssl_object: ssl.SSLObject | None,
        read_bio: ssl.MemoryBIO | None,
        write_bio: ssl.MemoryBIO | None,
    ) -> None:
        self.transport = transport
        self.feed = feed
        self.should_stop = should_stop
        self.decoder = ChunkedDecoder() if chunked else None
        self.left = length  # Content-Length bytes still expected, None: until EOF
        self.max_bytes = max_bytes
        self.n_bytes = 0
        self.ssl_object = ssl_object
        self.read_bio = read_bio
        self.write_bio = write_bio
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future[str] = self.loop.create_future()
        self.t_done: int | None = None
        self._tls_closed = False
        self._sock: socket.socket | None = None  # read here with recvmsg (kernel stamps)

    # -- reading ------------------------------------------------------------------------

    def start_reading(self) -> None:
        """Read on: from the socket with its kernel stamps where we can, else through the
        transport's own reads."""
        sock = _stampable_socket(self.transport)
        if sock is not None:
            # The public add_reader refuses a transport's socket; the selector loop's own
            # (what the transport itself calls) takes it while the transport is paused.
            add_reader = getattr(self.loop, "_add_reader", None)
            if add_reader is None or not hasattr(self.loop, "_remove_reader"):
                sock = None
            else:
                self.transport.pause_reading()  # its reads would take our bytes unstamped
                add_reader(sock.fileno(), self._readable)
        if sock is None:
            self.transport.resume_reading()
            return
        self._sock = sock
        self._readable()  # bytes that arrived before the reader was added

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            data, ancillary, _, _ = sock.recvmsg(_READ_SIZE, kernel_stamps.ANCILLARY_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._stop_reading()
            self.on_lost(exc)
            return
        now = perf_counter_ns()
        if not data:
            self._stop_reading()
            self.on_eof()
            return
        self.on_data(data, kernel_stamps.arrived_ns(ancillary, now) or now)

    def _stop_reading(self) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            self.transport.pause_reading()
        else:
            self.loop._remove_reader(sock.fileno())  # type: ignore[attr-defined]

    # -- completion ---------------------------------------------------------------------

    def _finish(self, how: str) -> None:
        if not self.done.done():
            self.t_done = perf_counter_ns()
            self.done.set_result(how)
            self._stop_reading()

    def _fail(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)
            self._stop_reading()

    # -- bytes in -----------------------------------------------------------------------

    def on_data(self, data: bytes, t: int) -> None:
        if self.done.done():
            return
        try:
            if self.ssl_object is not None:
                data = self._decrypt(data)
            if data:
                self._body(data, t)
        except Exception as exc:  # parser limits, framing, TLS: end the read with it
            self._fail(exc)
            return
        if self._tls_closed:
            self.on_eof()

    def _decrypt(self, data: bytes) -> bytes:
        assert self.read_bio is not None and self.ssl_object is not None
        if data:
            self.read_bio.write(data)
        out: list[bytes] = []
        while True:
            try:
                plain = self.ssl_object.read(65536)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self._tls_closed = True
                break
            if not plain:
                # The peer's close_notify (an SSLObject reads it as b""): the end of the
                # byte stream, as a FIN is without TLS. Missing it left a server that
                # closed mid-body waiting for our reply, and us for the stall limit.
                self._tls_closed = True
                break
            out.append(plain)
        if self.write_bio is not None and self.write_bio.pending:
            self.transport.write(self.write_bio.read())  # e.g. a TLS key update reply
        return b"".join(out)

    def _body(self, data: bytes, t: int) -> None:
        if self.decoder is not None:
            data = self.decoder.decode(data)
        elif self.left is not None:
            data = data[: self.left]
            self.left -= len(data)
        if data:
            self.feed(data, t)
            self.n_bytes += len(data)
        if self.should_stop():
            self._finish("stopped")
        elif self.n_bytes > self.max_bytes:
            self._fail(ResponseTooLarge(f"response larger than {self.max_bytes} bytes"))
        elif (self.decoder is not None and self.decoder.done) or self.left == 0:
            self._finish("complete")

    def on_eof(self) -> None:
        if self.decoder is None and self.left is None:
            self._finish("eof")  # body delimited by connection close
        elif not self.done.done():
            self._fail(httpx.RemoteProtocolError("peer closed connection mid-body"))

    def on_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self._fail(httpx.ReadError(f"connection lost: {exc!r}"))
        else:
            self.on_eof()

    async def wait(self) -> str:
        try:
            return await self.done
        finally:
            self.transport.close()


def take_over(
    response: httpx.Response,
    feed: Feed,
    should_stop: Callable[[], bool],
    max_bytes: int,
) -> FastBodyReader | None:
    """Switch ``response``'s body reading to a FastBodyReader, or None if not possible.

    Bytes that the lower layers already received are fed first, with the time of the
    take-over (they were read before we could stamp them, but at most moments ago).
    """
    if response.headers.get("content-encoding", "identity").lower() not in ("", "identity"):
        return None
    h11 = _find_h11(response)
    network = response.extensions.get("network_stream")
    stream = getattr(network, "_stream", None)
    if h11 is None or stream is None:
        return None
    ssl_object = read_bio = write_bio = None
    socket_stream = stream
    if hasattr(stream, "_ssl_object"):  # anyio TLSStream over a SocketStream
        ssl_object = stream._ssl_object
        read_bio, write_bio = stream._read_bio, stream._write_bio
        socket_stream = stream.transport_stream
    transport = getattr(socket_stream, "_transport", None)
    protocol = getattr(socket_stream, "_protocol", None)
    queue = getattr(protocol, "read_queue", None)
    if not isinstance(transport, asyncio.Transport) or queue is None:
        return None
    try:
        buffered, closed = h11.trailing_data
    except AttributeError:
        return None

    te = response.headers.get("transfer-encoding", "").lower()
    length = response.headers.get("content-length")
    reader = FastBodyReader(
        transport,
        feed,
        should_stop,
        chunked="chunked" in te,
        length=int(length) if length and "chunked" not in te else None,
        max_bytes=max_bytes,
        ssl_object=ssl_object,
        read_bio=read_bio,
        write_bio=write_bio,
    )
    at_eof = bool(getattr(protocol, "is_at_eof", False)) or closed
    pending = list(queue)
    queue.clear()
    transport.set_protocol(_BodyProtocol(reader))
    t = perf_counter_ns()
    if buffered:  # plaintext h11 had already read past the headers
        reader._body(buffered, t)
    if ssl_object is not None:
        for raw in pending:
            read_bio.write(raw)  # type: ignore[union-attr]
        if not reader.done.done():
            reader.on_data(b"", t)  # decrypt what the TLS layer already holds
    else:
        for raw in pending:
            if not reader.done.done():
                reader._body(raw, t)
    if at_eof:
        reader.on_eof()
    if not reader.done.done():
        reader.start_reading()
    return reader


def _stampable_socket(transport: asyncio.Transport) -> socket.socket | None:
    """The TCP socket under an asyncio transport, with kernel stamps on; None if not."""
    if kernel_stamps.SO_TIMESTAMPNS is None:
        return None
    wrapper = transport.get_extra_info("socket")
    sock = getattr(wrapper, "_sock", wrapper)  # asyncio's TransportSocket holds the socket
    if not isinstance(sock, socket.socket) or sock.type != socket.SOCK_STREAM:
        return None
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    return sock if kernel_stamps.enable(sock) else None
