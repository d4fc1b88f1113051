"""A loopback HTTP listener that counts the connections it accepts and keeps each
request's head: the witness for the one door out's tests (did anything get here, and
did it carry the key?). It answers every request with one fixed body and closes."""

from __future__ import annotations

import socketserver
import threading


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: CountingListener = self.server  # type: ignore[assignment]
        with server.lock:
            server.connections += 1
        data = b""
        self.request.settimeout(5)
        try:
            while b"\r\n\r\n" not in data:
                chunk = self.request.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(rest) < length:
                chunk = self.request.recv(65536)
                if not chunk:
                    break
                rest += chunk
            with server.lock:
                server.heads.append(head.decode("latin-1"))
            self.request.sendall(
                server.status_line + b"\r\ncontent-type: " + server.content_type + b"\r\n"
                b"content-length: " + str(len(server.body)).encode() + b"\r\n"
                b"connection: close\r\n\r\n" + server.body
            )
        except OSError:
            pass


class CountingListener(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, body: bytes = b"{}", content_type: bytes = b"application/json") -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.body = body
        self.status_line = b"HTTP/1.1 200 OK"  # a test may answer a redirect instead
        self.content_type = content_type
        self.connections = 0
        self.heads: list[str] = []
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
