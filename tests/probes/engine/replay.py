"""A tiny HTTP/1.1 server that replays recorded SSE transcripts over real sockets.

URL layout: ``/{fixture}/{mode}/v1/...`` where mode is ``whole``, ``bytes`` (one byte
per chunked-encoding chunk, so the client's parser is fed one byte at a time whatever
TCP does) or ``random-SEED`` (chunks cut at random offsets). ``.http`` fixtures (a whole
HTTP response) are written to the socket verbatim.
"""

from __future__ import annotations

import random
import socket
import socketserver
import threading

from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "sse"


def split(body: bytes, mode: str) -> list[bytes]:
    if mode == "whole":
        return [body]
    if mode == "bytes":
        return [body[i : i + 1] for i in range(len(body))]
    if mode.startswith("random-"):
        rng = random.Random(int(mode.split("-", 1)[1]))
        parts, i = [], 0
        while i < len(body):
            n = rng.choice((1, 2, 3, 5, 8, 13, 64, 200, 1000))
            parts.append(body[i : i + n])
            i += n
        return parts
    raise ValueError(mode)


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            line = self.rfile.readline()
            if not line:
                return
            method, path, _ = line.decode("latin-1").split(" ", 2)
            length = 0
            while True:
                header = self.rfile.readline()
                if header in (b"\r\n", b"\n", b""):
                    break
                name, _, value = header.decode("latin-1").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            self.rfile.read(length)
            if not self._respond(method, path):
                return

    def _respond(self, method: str, path: str) -> bool:
        parts = path.strip("/").split("/")
        name, mode = parts[0], parts[1]
        if method == "GET":  # the engine's warm-up request
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
            return True
        http = FIXTURES / f"{name}.http"
        if http.exists():
            self.wfile.write(http.read_bytes())
            return True
        body = (FIXTURES / f"{name}.sse").read_bytes()
        out = [
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        ]
        out += [b"%x\r\n%b\r\n" % (len(p), p) for p in split(body, mode) if p]
        out.append(b"0\r\n\r\n")
        self.wfile.write(b"".join(out))
        return True


class ReplayServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def base_url(self, fixture: str, mode: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{fixture}/{mode}/v1"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
