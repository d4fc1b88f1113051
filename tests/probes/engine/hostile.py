"""A raw-socket HTTP/1.1 server whose answers a test scripts: a provider that stalls,
trickles, never ends, or sends whatever bytes the test (or hypothesis) chose.

One long-lived server: set ``server.on_get`` / ``server.on_post`` per test or per
example. A responder gets a ``Conn`` and writes raw bytes with it; the connection is
kept open for the next request when the responder returns True (the warm-up GET, so that
the measured POST reuses the connection as it does with a real provider).
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Callable

import orjson


class Conn:
    def __init__(self, sock: socket.socket, server: HostileServer) -> None:
        self.sock = sock
        self.server = server

    def write(self, data: bytes) -> bool:
        """False once the client has gone away."""
        try:
            self.sock.sendall(data)
        except OSError:
            return False
        with self.server.lock:
            self.server.sent_bytes += len(data)
        return True

    def client_gone(self, wait_s: float) -> bool:
        """Wait up to wait_s for the client to close the connection."""
        self.sock.settimeout(wait_s)
        try:
            return self.sock.recv(1, socket.MSG_PEEK) == b""
        except TimeoutError:
            return False
        except OSError:
            return True
        finally:
            self.sock.settimeout(None)


Responder = Callable[[Conn], bool]


def small_json(conn: Conn) -> bool:
    conn.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}")
    return True


def chat_stream(text: str = "hello there", **usage: object) -> bytes:
    """A short, complete openai-chat event stream."""
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if usage:
        events.append({"choices": [], "usage": usage})
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    return body


def sse_response(body: bytes, status: str = "200 OK", headers: bytes = b"") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: text/event-stream\r\n".encode()
        + headers
        + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )


def answer(raw: bytes) -> Responder:
    def respond(conn: Conn) -> bool:
        conn.write(raw)
        return False

    return respond


class _Handler(socketserver.BaseRequestHandler):
    server: HostileServer

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        conn = Conn(sock, self.server)
        try:
            while True:
                line = reader.readline(65536)
                if not line:
                    return
                method = line.split(b" ", 1)[0].decode("latin-1")
                length = 0
                while True:
                    header = reader.readline(65536)
                    if header in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = header.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                reader.read(length)
                with self.server.lock:
                    self.server.requests.append(method)
                respond = self.server.on_get if method == "GET" else self.server.on_post
                if not respond(conn):
                    return
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class HostileServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.sent_bytes = 0
        self.requests: list[str] = []
        self.on_get: Responder = small_json
        self.on_post: Responder = answer(sse_response(chat_stream()))
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def reset(self) -> None:
        with self.lock:
            self.sent_bytes = 0
            self.requests = []
        self.on_get = small_json
        self.on_post = answer(sse_response(chat_stream()))

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


# -- responders of a hostile provider -------------------------------------------------------


def headers_then_silence(conn: Conn) -> bool:
    conn.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 99\r\n\r\n")
    conn.client_gone(30)
    return False


def endless_body(conn: Conn) -> bool:
    conn.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n")  # body until close
    block = b"x" * 65536
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and conn.write(block):
        pass
    return False


def trickle(conn: Conn) -> bool:
    conn.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 999\r\n\r\n")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and conn.write(b"x"):
        if conn.client_gone(0.1):
            break
    return False
