"""The simulated provider: an HTTP/1.1 streaming server with a known schedule.

Requests are parsed here and routed by the dialect registry's paths (chat, messages,
responses, the tokenize routes, /v1/models, /props); each streaming answer is a
``Stream`` (stream.py) that the ``Scheduler`` (scheduler.py) emits on time. Errors before
the stream (auth, rate limit, …) are answered here, faults during it by the stream.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import socket
import ssl
import time
from collections import OrderedDict
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import orjson

from probes.engine import tokens  # the same o200k count the engine uses
from probes.engine.dialects import DIALECTS

from . import arrival, content
from .events import EVENTS
from .profiles import BUILTIN, Profile, resolve
from .scheduler import Scheduler
from .stream import Stream
from .telemetry import PowerModel, ServerStats, load_request

_MAX_HEADER = 64 * 1024
_BACKLOG = 256
_ids = itertools.count(1)


_ERRORS = {
    "auth": (
        401,
        "Unauthorized",
        {
            "message": "Invalid API key (simulated)",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        },
    ),
    "not_found": (
        404,
        "Not Found",
        {
            "message": "The model does not exist (simulated)",
            "type": "invalid_request_error",
            "code": "model_not_found",
        },
    ),
    "rate_limit": (
        429,
        "Too Many Requests",
        {
            "message": "Rate limit reached (simulated)",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        },
    ),
    "server_error": (
        500,
        "Internal Server Error",
        {"message": "Server error (simulated)", "type": "server_error", "code": None},
    ),
}


class _Conn(asyncio.Protocol):
    """One HTTP/1.1 connection: parses requests, keeps alive, streams responses."""

    def __init__(self, server: SimulatorServer) -> None:
        self.server = server
        self.buf = b""
        self.sock: object = None  # the transport's socket (its arrival stamps: arrival.py)
        self.busy = False
        self.closed = False
        self.keep_alive = True
        self.stream: Stream | None = None
        self.prompt_tokens = 0
        self.cached_tokens = 0  # of prompt_tokens, served from the prompt cache
        self.max_tokens = 0
        self.request_metrics = False  # the request asked for its figures in the response

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.sock = sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.stream is not None:
            self.server.stats.ended(id(self.stream))

    def pause_writing(self) -> None:
        if self.stream is not None:
            self.stream.paused = True

    def resume_writing(self) -> None:
        stream = self.stream
        if stream is not None and stream.paused:
            stream.paused = False
            self.server.scheduler.add(stream, perf_counter_ns())

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._next_request()

    def _next_request(self) -> None:
        if self.busy or self.closed:
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > _MAX_HEADER:
                self.transport.close()
            return
        head = self.buf[:end].decode("latin-1").split("\r\n")
        try:
            method, path, version = head[0].split(" ", 2)
        except ValueError:
            self.transport.close()
            return
        headers = {}
        for line in head[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length") or 0)
        if len(self.buf) < end + 4 + length:
            return  # wait for the rest of the body
        body = self.buf[end + 4 : end + 4 + length]
        self.buf = self.buf[end + 4 + length :]
        # The whole request has arrived: when its last bytes reached the machine.
        t_request = arrival.arrived_ns(self.sock) or perf_counter_ns()
        self.busy = True
        self.keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
        self.server.handle(self, method, path.split("?", 1)[0], headers, body, t_request)

    # -- responses --------------------------------------------------------------------

    def respond(
        self,
        status: int,
        reason: str,
        body: bytes,
        content_type: str = "application/json",
        extra: dict[str, str] | None = None,
    ) -> None:
        lines = [
            f"HTTP/1.1 {status} {reason}",
            f"content-type: {content_type}",
            f"content-length: {len(body)}",
        ]
        lines += [f"{k}: {v}" for k, v in (extra or {}).items()]
        if not self.keep_alive:
            lines.append("connection: close")
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        self._done()

    def start_chunked(self, first: bytes) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        self.transport.write(head + b"%x\r\n%b\r\n" % (len(first), first))

    def write_chunk(self, data: bytes) -> None:
        if not self.closed and data:
            self.transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    def end_chunked(self) -> None:
        if not self.closed:
            self.transport.write(b"0\r\n\r\n")
        self.stream = None
        self._done()

    def _done(self) -> None:
        self.busy = False
        if not self.keep_alive:
            self.transport.close()
            return
        if self.buf:
            self._next_request()


@dataclass(frozen=True)
class ServerTraits:
    """How the server describes itself, like a local llama.cpp or vLLM server.

    context_tokens: listed in /v1/models (meta.n_ctx_train, max_model_len) and /props
    (n_ctx); a request's output stops where the context is full (finish "length"), and
    a prompt that does not fit is refused with 400, as llama.cpp does.
    total_slots: reported by /props and /slots (llama.cpp's parallel slots).
    usage: False omits the usage chunk from OpenAI streams.
    tokenize: serve POST /tokenize (o200k_base token ids).
    metrics: serve GET /metrics as "vllm" or "llama.cpp" publish it; the stream then leaves
    out its own timing (time_info) unless the request asks ``"return_request_metrics":
    true``, as a self-hosted engine does.
    power: serve GET /dcgm/metrics, a DCGM exporter whose energy follows this model
    (POST /dcgm/reset restarts its counter).
    batch_tps: a batched server's total output rate, shared by the streams in flight (so a
    concurrency sweep finds its knee).
    Any server takes POST /simulator/load {"running", "per_s", "seconds"}: background
    requests that share /metrics windows and draw power.
    """

    context_tokens: int | None = None
    total_slots: int | None = None
    usage: bool = True
    tokenize: bool = False
    metrics: str | None = None
    power: PowerModel | None = None
    batch_tps: float | None = None  # all streams together: each gets batch_tps / in flight


class SimulatorServer:
    def __init__(
        self,
        default: Profile | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        apis: tuple[str, ...] = tuple(EVENTS),
        traits: ServerTraits | None = None,
        ssl_context: ssl.SSLContext | None = None,
        tokenizer: str | None = None,
    ) -> None:
        self.default = default or Profile()
        self.traits = traits or ServerTraits()
        # Which server's tokenize route to answer: "llama.cpp", "vllm", "llama-cpp-python"
        # (else traits.tokenize: an o200k /tokenize).
        self.tokenizer = tokenizer
        self.host = host
        self.port = port
        self.apis = apis
        self.ssl_context = ssl_context  # serve HTTPS, as every real provider does
        self.scheduler: Scheduler
        self._server: asyncio.base_events.Server | None = None
        # One failure draw sequence per model name, seeded by its profile: the n-th request
        # for a name meets the same fault (or none) on every run of the same test.
        self._failure_rngs: dict[str, random.Random] = {}
        self._prompt_cache: OrderedDict[bytes, bool] = OrderedDict()
        if self.traits.metrics not in (None, "vllm", "llama.cpp"):
            raise ValueError(f"metrics must be vllm or llama.cpp, not {self.traits.metrics!r}")
        self.stats = ServerStats(self.traits.metrics, self.traits.power)
        self.started = time.monotonic()  # profiles' slow episodes count from here

    async def start(self) -> int:
        tokens.encoding()  # load the tokenizer now, not inside the first request's TTFT
        loop = asyncio.get_running_loop()
        self.scheduler = Scheduler(loop)
        # Receipts stamped by the kernel where it can (arrival.py), else by our loop.
        sock = arrival.listener(self.host, self.port, _BACKLOG)
        if sock is not None:
            self._server = await loop.create_server(
                lambda: _Conn(self), sock=sock, ssl=self.ssl_context
            )
        else:
            self._server = await loop.create_server(
                lambda: _Conn(self),
                self.host,
                self.port,
                reuse_address=True,
                backlog=_BACKLOG,
                ssl=self.ssl_context,
            )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()

    @property
    def base_url(self) -> str:
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{self.host}:{self.port}/v1"

    def handle(
        self,
        conn: _Conn,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        t_request: int,
    ) -> None:
        if method == "GET" and path.endswith("/models"):
            ctx = self.traits.context_tokens
            models = [
                {"id": name, "object": "model", "owned_by": "inferwatch-simulator"}
                | ({"meta": {"n_ctx_train": ctx * 4}} if ctx else {})
                for name in ("sim-default", *BUILTIN)
            ]
            conn.respond(200, "OK", orjson.dumps({"object": "list", "data": models}))
            return
        if self.tokenizer and method == "POST" and path in ("/tokenize", "/extras/tokenize"):
            self._tokenize(conn, path, body)  # the server style the simulator plays
            return
        if self._describe(conn, method, path, body) or self._telemetry(conn, method, path, body):
            return
        if method != "POST":
            conn.respond(405, "Method Not Allowed", b'{"error":{"message":"use POST"}}')
            return
        if path in ("/tokenize", "/extras/tokenize"):
            self._tokenize(conn, path, body)
            return
        api = next(
            (d.name for d in DIALECTS.values() if path.endswith(d.path) and d.name in self.apis),
            None,
        )
        if api is None:
            conn.respond(404, "Not Found", b'{"error":{"message":"unknown path"}}')
            return
        try:
            req = orjson.loads(body)
            model = str(req.get("model") or "sim-default")
            profile = resolve(model, self.default)
        except (orjson.JSONDecodeError, ValueError, AttributeError) as exc:
            msg = orjson.dumps(
                {"error": {"message": f"bad request: {exc}", "type": "invalid_request_error"}}
            )
            conn.respond(400, "Bad Request", msg)
            return
        profile = profile.at(time.monotonic() - self.started)
        if profile.error_rate:
            rng = self._failure_rngs.setdefault(model, random.Random(profile.seed))
            profile = profile.for_request(rng)
        self._stream(conn, api, req, profile, t_request)

    def _describe(self, conn: _Conn, method: str, path: str, body: bytes) -> bool:
        """llama.cpp's self-description routes, when the traits ask for them."""
        traits = self.traits
        if method == "GET" and path == "/props" and traits.context_tokens:
            props = {
                "default_generation_settings": {"n_ctx": traits.context_tokens},
                "total_slots": traits.total_slots or 1,
                "model_path": "simulated.gguf",
            }
            conn.respond(200, "OK", orjson.dumps(props))
            return True
        if method == "GET" and path == "/slots" and traits.total_slots:
            slots = [{"id": i, "n_ctx": traits.context_tokens} for i in range(traits.total_slots)]
            conn.respond(200, "OK", orjson.dumps(slots))
            return True
        if method == "POST" and path == "/tokenize" and traits.tokenize:
            try:
                req = orjson.loads(body)
                text = str(req.get("content") or req.get("prompt") or "")
            except (orjson.JSONDecodeError, AttributeError):
                text = ""
            ids = tokens.encoding().encode(text)
            conn.respond(200, "OK", orjson.dumps({"tokens": ids, "count": len(ids)}))
            return True
        return False

    def _telemetry(self, conn: _Conn, method: str, path: str, body: bytes) -> bool:
        """/metrics, the DCGM exporter and background load (ServerTraits)."""
        stats, text = self.stats, "text/plain; version=0.0.4"
        if method == "GET" and path == "/metrics" and self.traits.metrics:
            conn.respond(200, "OK", stats.metrics().encode(), content_type=text)
        elif method == "GET" and path == "/dcgm/metrics" and self.traits.power:
            conn.respond(200, "OK", stats.dcgm().encode(), content_type=text)
        elif method == "POST" and path == "/dcgm/reset" and self.traits.power:
            stats.reset_energy()
            conn.respond(200, "OK", b"{}")
        elif method == "POST" and path == "/simulator/load":
            try:
                running, per_s, seconds = load_request(orjson.loads(body or b"{}"))
            except (orjson.JSONDecodeError, ValueError, TypeError, AttributeError) as exc:
                conn.respond(400, "Bad Request", orjson.dumps({"error": {"message": str(exc)}}))
                return True
            stats.load(asyncio.get_running_loop(), running, per_s, seconds)
            conn.respond(200, "OK", b"{}")
        else:
            return False
        return True

    def _cached(self, req: dict[str, Any], prompt_tokens: int) -> int:
        """Prompt tokens a provider's prompt cache would serve: all of a prompt seen in
        the last few hundred requests, none of a new one (prefix matching simplified)."""
        key = orjson.dumps([req.get("model"), req.get("system"), req.get("messages")])
        if key in self._prompt_cache:
            self._prompt_cache.move_to_end(key)
            return prompt_tokens
        self._prompt_cache[key] = True
        if len(self._prompt_cache) > 256:
            self._prompt_cache.popitem(last=False)
        return 0

    def _tokenize(self, conn: _Conn, path: str, body: bytes) -> None:
        """The tokenize route of the server this simulator plays (``tokenizer``).

        llama.cpp: ``/tokenize {"content", "add_special"=false}``; vLLM: ``/tokenize
        {"prompt", "add_special_tokens"=true}`` answering a count too; llama-cpp-python:
        ``/extras/tokenize {"input"}``, always with BOS. Others answer 404, as OpenAI does.
        """
        style = self.tokenizer
        expected = "/extras/tokenize" if style == "llama-cpp-python" else "/tokenize"
        if style is None or path != expected:
            conn.respond(404, "Not Found", b'{"error":{"message":"unknown path"}}')
            return
        try:
            req = orjson.loads(body)
            if style == "llama.cpp":
                text, bos = req["content"], bool(req.get("add_special", False))
            elif style == "vllm":
                text, bos = req["prompt"], bool(req.get("add_special_tokens", True))
            else:
                text, bos = req["input"], True
            if not isinstance(text, str):
                raise TypeError("text must be a string")
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            msg = orjson.dumps({"error": {"message": f"bad request: {exc}"}})
            conn.respond(400, "Bad Request", msg)
            return
        ids = [1] * bos + [100 + i for i, _ in enumerate(content.model_tokens(text))]
        answer: dict[str, Any] = {"tokens": ids}
        if style == "vllm":
            answer = {"count": len(ids), "max_model_len": 131072, "tokens": ids}
        conn.respond(200, "OK", orjson.dumps(answer))

    def _stream(
        self, conn: _Conn, api: str, req: dict[str, Any], profile: Profile, t_request: int
    ) -> None:
        fault = profile.fault
        if fault in _ERRORS:
            status, reason, err = _ERRORS[fault]
            extra = {}
            if fault == "rate_limit":
                extra = {
                    "retry-after": "7",
                    "x-ratelimit-limit-requests": "100",
                    "x-ratelimit-remaining-requests": "0",
                    "x-ratelimit-reset-requests": "7s",
                }
            conn.respond(status, reason, orjson.dumps({"error": err}), extra=extra)
            return
        if fault == "html_200":
            page = b"<html><body><h1>502 Bad Gateway</h1><p>simulated proxy page</p></body></html>"
            conn.respond(200, "OK", page, content_type="text/html; charset=utf-8")
            return
        max_tokens = int(
            req.get("max_tokens")
            or req.get("max_completion_tokens")
            or req.get("max_output_tokens")
            or 256
        )
        conn.max_tokens = max_tokens
        conn.request_metrics = req.get("return_request_metrics") is True
        cap = profile.max_output_tokens  # where the model ends its answer (its EOS)
        n_tokens = max_tokens if cap is None else min(max_tokens, cap)
        # Like vLLM: ignore_eos runs to max_tokens, min_tokens holds the end off till then.
        held = _held_to(req, max_tokens)
        conn.prompt_tokens = _prompt_tokens(req)
        ctx = self.traits.context_tokens
        if ctx is not None:
            if conn.prompt_tokens >= ctx:
                message = (
                    f"the request exceeds the available context size ({conn.prompt_tokens} "
                    f"prompt tokens, context {ctx})"
                )
                err = {"error": {"message": message, "type": "exceed_context_size_error"}}
                conn.respond(400, "Bad Request", orjson.dumps(err))
                return
            n_tokens = min(n_tokens, ctx - conn.prompt_tokens)
        conn.cached_tokens = self._cached(req, conn.prompt_tokens)
        model = str(req.get("model") or profile.name)
        request_id = f"sim-{next(_ids)}"
        with_usage = profile.usage == "full"
        events: Any = EVENTS[api](
            model, request_id, conn.prompt_tokens, with_usage, conn.cached_tokens
        )
        # Asked for a tool call or JSON, answer with one (as model tokens).
        script, tool_name = None, None
        tool = content.requested_tool(req)
        schema = content.response_schema(req)
        if tool is not None:
            tool_name = tool[0]
            script = content.model_tokens(content.json_text(tool[1]))
        elif schema is not None:
            script = content.model_tokens(content.json_text(schema))
        if script is not None:
            n_tokens = min(n_tokens, profile.reasoning_tokens + len(script))
        if held > n_tokens:
            # Past its end the answer runs on in words: a JSON object or a tool call no
            # longer parses (why Inferwatch never sends these with a checked answer).
            if script is not None:
                pad = held - profile.reasoning_tokens - len(script)
                script = script + [content.word(i) for i in range(max(0, pad))]
            n_tokens = held if ctx is None else min(held, ctx - conn.prompt_tokens)
        stream = Stream(conn, profile, events, n_tokens, t_request, script, tool_name)
        conn.stream = stream
        conn.start_chunked(events.head())
        self.scheduler.add(stream, stream.next_due)


def _held_to(req: dict[str, Any], max_tokens: int) -> int:
    """Output tokens the request holds the answer to, whatever the model's own end."""
    if req.get("ignore_eos") is True:
        return max_tokens
    min_tokens = req.get("min_tokens")
    if isinstance(min_tokens, int) and not isinstance(min_tokens, bool) and min_tokens > 0:
        return min(min_tokens, max_tokens)
    return 0


def _prompt_tokens(req: dict[str, Any]) -> int:
    texts = []
    for m in req.get("messages") or req.get("input") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p.get("text", "") for p in content if isinstance(p, dict)]
    if isinstance(req.get("system"), str):
        texts.append(req["system"])
    return sum(tokens.count(t) for t in texts)
