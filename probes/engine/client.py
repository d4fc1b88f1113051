"""Stream one request and time what arrives: the lean reader of the measurement engine.

Why it looks the way it does (README, Benchmarks, has the measurements):

* Stamp at the read, parse inline. Each chunk from httpx's raw byte stream is stamped
  with ``perf_counter_ns`` before anything else and fed straight to the SSE parser, which
  gives every event in it that timestamp. No line iterator, no per-event objects.
* Limits without per-read cost. A single timer callback (the watchdog) re-arms itself on
  the next deadline (connect / first token / stall / total) and cancels the task when one
  passes; the read loop only stores timestamps it stores anyway.
* Garbage collector off during streams, collect + freeze between them: collection
  pauses of 60-100 ms otherwise land inside concurrent streams.
* Warm connection. A cheap GET on the same host first, so that TTFT is measured on an
  open connection as a pooled client sees it; connection phases are timed via httpx's
  ``trace`` extension and reported as ``connect_ms``.
* t0 at the send. On a warm connection t0 is re-stamped as httpcore announces the
  request body's send (``http11.send_request_body.started``): nothing yields between that
  and the body's write to the socket, while each await before it lets the loop run every
  other stream's ready work. With 64 streams starting in one second, t0 stamped at the
  top of the request came out up to 35 ms before the bytes left, our delay counted as
  the provider's TTFT. On a new connection t0 stays at the top: its setup is part of
  what a new client waits for.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import ssl
import threading
import time
from time import perf_counter_ns
from typing import Any

from . import (
    bounded,
    door,
    fastread,
    gc_pause,
    http_errors,
    loop_lag,
    measurers,
    reasons,
    sanitize,
    scrub,
    start_gate,
    telemetry,
    tokenize,
    tokens,
)
from .dialects import StreamRecorder, new_recorder
from .fastread import ResponseTooLarge
from .metrics import ServerCount, fill_metrics, prompt_texts, stream_counts
from .request import ProbeRequest
from .result import RunResult
from .sse import EventTooLarge, SSEParser

# After an error event, wait at most this long for the server to end the stream.
_ERROR_GRACE_NS = 2_000_000_000


# -- streams in flight -----------------------------------------------------------------

# Streams of this process now between t0 and the end of their read loop. A stream that
# has ended computes its metrics only once the others are quiet (or after _QUIET_MAX_S):
# its timestamps are taken, but theirs are not yet, and tokenising would delay them.
_reading = 0
_reading_lock = threading.Lock()
_QUIET_MAX_S = 2.0


def _reading_add(delta: int) -> None:
    global _reading
    with _reading_lock:
        _reading += delta


async def _until_quiet() -> None:
    waited = 0.0
    while _reading > 0 and waited < _QUIET_MAX_S:
        await asyncio.sleep(0.005)
        waited += 0.005


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: building one (loading the CA bundle) costs ~10-20 ms
    of CPU, which would otherwise land on concurrent streams at every probe's start."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


# -- one measurement ------------------------------------------------------------------


class _Measurement:
    def __init__(self, req: ProbeRequest, start: start_gate.Member) -> None:
        self.req = req
        self.start = start  # released once the measured request is sent (start_gate.py)
        self.result = RunResult(api=req.api, model=req.model)
        limits = req.limits
        self.rec: StreamRecorder = new_recorder(req.api)
        self.rec.bound(
            limits.max_output_events,
            limits.max_tool_calls,
            limits.max_content_chars,
            limits.max_json_nodes,
        )
        self.parser = SSEParser(
            self.rec.on_event,
            self.rec.on_comment,
            limits.max_event_bytes,
            limits.max_events,
            limits.max_lines,
        )
        self.t0 = 0
        self.t_end: int | None = None
        self.t_headers: int | None = None
        self.streamed = False  # a 2xx event stream was being read
        self.failure: tuple[str, str] | None = None  # (status, message) from I/O
        self.timed_out: str | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._connect_started: int | None = None
        self._connect_ms: float | None = None
        self._tcp_ms: float | None = None  # DNS + the TCP handshake: one round trip
        self._tls_started: int | None = None
        self._tls_ms: float | None = None
        self._in_measured_request = False
        self._measured_request_connected = False
        self._cpu0 = 0.0
        self._cpu_ms: float | None = None
        self.read_path: str | None = None  # "transport" (fastread) or "aiter_raw"
        self.warmup_error: str | None = None  # why the warm-up GET was given up
        self.tokenize_error: str | None = None
        self.lag: loop_lag.Lag | None = None  # how late our loop was while reading

    # httpx/httpcore call this at each connection and request phase.
    async def _trace(self, name: str, info: dict[str, Any]) -> None:
        if name == "connection.connect_tcp.started":
            self._connect_started = perf_counter_ns()
            if self._in_measured_request:
                self._measured_request_connected = True
        elif name in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            now = perf_counter_ns()
            if self._connect_started is not None:
                self._connect_ms = round((now - self._connect_started) / 1e6, 3)
                if name == "connection.connect_tcp.complete":
                    self._tcp_ms = self._connect_ms
            if name == "connection.start_tls.complete" and self._tls_started is not None:
                self._tls_ms = round((now - self._tls_started) / 1e6, 3)
        elif name == "connection.start_tls.started":
            self._tls_started = perf_counter_ns()
        elif name == "http11.send_request_body.started" and self._in_measured_request:
            if not self._measured_request_connected:
                self.t0 = self.result.t0_ns = perf_counter_ns()  # the module's "t0 at the send"
        elif name == "http11.send_request_body.complete" and self._in_measured_request:
            self.start.sent()  # the next stream may start its own while this one waits
        elif name == "http11.receive_response_headers.complete":
            self.t_headers = perf_counter_ns()

    async def run(self) -> RunResult:
        req, result = self.req, self.result
        result.started_at = dt.datetime.now(dt.UTC)
        tokens.encoding()  # loaded once per process, never inside anyone's stream
        limits = req.limits
        gc_pause.enter()
        try:
            async with door.async_client(
                connect_s=limits.connect_s,
                max_connections=1,
                verify=_ssl_context(),
                keys=req.key_bindings(),
            ) as client:
                if req.warm:
                    await self._warm_up(client)
                _reading_add(1)
                try:
                    await self._measure(client)
                finally:
                    _reading_add(-1)
            await _until_quiet()
            try:
                counts = await stream_counts(self.rec)
            except Exception:  # odd provider text: _finish meets it again and says so
                counts = None
        finally:
            gc_pause.leave()
        server_count = await self._server_count()
        self._finish(counts, server_count)
        return result

    async def _server_count(self) -> ServerCount | None:
        """Token counts by the server itself, when the stream had no usage: Ollama's
        eval_count, or the tokenize route for the output and the prompt (asked after
        the stream, outside the timed window)."""
        method, rec = self.req.token_counter, self.rec
        if method is None or not self.streamed:
            return None
        usage = rec.normalized_usage()
        if usage and usage.get("completion_tokens") is not None:
            return None  # usage is the better source
        if method == "ollama":
            return ServerCount(rec.eval_count, method) if rec.eval_count is not None else None
        output = ["".join(rec.answer_parts), "".join(rec.reasoning_parts), "".join(rec.tool_parts)]
        headers = {
            k: v for k, v in self.req.headers().items() if k not in ("accept", "content-type")
        }
        try:
            n_output, n_prompt = await tokenize.count_groups(
                method,
                self.req.base_url,
                self.req.model,
                [output, prompt_texts(self.req.messages)],
                headers=headers,
                keys=self.req.key_bindings(),
            )
        except tokenize.TokenizeError as exc:
            self.tokenize_error = http_errors.short(str(exc))
            return None
        return ServerCount(n_output, method, n_prompt)

    async def _warm_up(self, client: door.AsyncClient) -> None:
        """Open the connection with a cheap GET, bounded in time and bytes: a server that
        stalls or never ends this answer must not hold the probe (it is not measured)."""
        headers = {k: v for k, v in self.req.headers().items() if k != "content-type"}
        limits = self.req.limits
        try:
            await bounded.bounded_request(
                client,
                "GET",
                self.req.warmup_url(),
                headers=headers,
                deadline_s=limits.warmup_s,
                max_bytes=limits.warmup_max_bytes,
                extensions={"trace": self._trace},
            )
        except (door.HTTPError, bounded.BoundedError) as exc:
            # The measured request will meet (and report) any real problem; a given-up
            # connection only makes it a cold one.
            self.warmup_error = http_errors.short(f"{type(exc).__name__}: {exc}", 200)

    async def _measure(self, client: door.AsyncClient) -> None:
        req = self.req
        headers = req.headers()
        headers.setdefault("accept-encoding", "identity")  # compression delays delivery
        body = req.body()
        url = req.url()
        task = asyncio.current_task()
        assert task is not None
        await self.start.go()  # a group's members send in turn, each right at its t0
        self._in_measured_request = True
        self._cpu0 = time.process_time()
        self.t0 = self.result.t0_ns = perf_counter_ns()  # re-stamped at the send if warm
        self._arm_watchdog(task)
        lag = loop_lag.watch(self.rec)
        try:
            async with client.stream(
                "POST", url, content=body, headers=headers, extensions={"trace": self._trace}
            ) as response:
                await self._read_response(response)
        except asyncio.CancelledError:
            if self.timed_out is None:
                raise  # cancelled by our caller, not by a limit
            task.uncancel()
            self.failure = (self.timed_out, f"{self.timed_out.replace('_', ' ')} limit reached")
        except (EventTooLarge, fastread.BodyError, bounded.UnreadableBody) as exc:
            self.failure = ("protocol_error", str(exc))
        except ResponseTooLarge as exc:
            self.failure = ("protocol_error", str(exc))
        except door.HTTPError as exc:
            self.failure = self._classify(exc)
        except Exception as exc:
            # Whatever else a response made our reader raise (an event no dialect rule
            # foresaw): the provider's answer broke the protocol; the run still ends.
            self.failure = ("protocol_error", _unreadable(exc))
            self.rec.finished = True  # nothing more is parsed from this response
        finally:
            if self._watchdog is not None:
                self._watchdog.cancel()
            self.lag = lag.close()
        if self.t_end is None:
            self.t_end = perf_counter_ns()
        self._cpu_ms = round((time.process_time() - self._cpu0) * 1e3, 3)
        if self.streamed and not self.rec.finished:
            self.parser.close()

    def _classify(self, exc: door.HTTPError) -> tuple[str, str]:
        msg = http_errors.short(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        if isinstance(exc, door.KeyRefused):
            return "auth_error", msg  # the door kept the key from an origin it is not bound to
        if isinstance(exc, door.ConnectTimeout | door.PoolTimeout):
            return "timeout_connect", msg
        if isinstance(exc, door.RemoteProtocolError) and self.streamed:
            # The peer closed (or broke framing) mid-body: the stream ended without
            # its completion marker. A reset (ECONNRESET) is a ReadError instead.
            return "truncated", msg
        if isinstance(exc, door.DecodingError | door.LocalProtocolError):
            return "protocol_error", msg
        if isinstance(exc, door.UnsupportedProtocol | door.InvalidURL):
            return "network_error", msg
        return "network_error", msg

    def _arm_watchdog(self, task: asyncio.Task[Any]) -> None:
        loop = asyncio.get_running_loop()
        limits = self.req.limits
        total_ns = int(limits.total_s * 1e9)
        first_ns = int(limits.first_token_s * 1e9)
        stall_ns = int(limits.stall_s * 1e9)
        rec = self.rec

        def check() -> None:
            now = perf_counter_ns()
            # From t0 as it stands: re-stamped at the send, limits count as e2e does.
            total_dl, first_dl = self.t0 + total_ns, self.t0 + first_ns
            if rec.first_output_t is None:
                deadline, kind = (first_dl, "timeout_first_token")
                # Output may start and then stall before the first-token deadline:
                # look again within one stall limit rather than at that deadline.
                wake = min(first_dl, now + stall_ns)
            else:
                deadline, kind = (rec.last_output_t + stall_ns, "timeout_stall")  # type: ignore[operator]
                wake = deadline
            if total_dl <= deadline:
                deadline, kind = total_dl, "timeout_total"
            if rec.error_t is not None and rec.error_t + _ERROR_GRACE_NS < deadline:
                deadline, kind = rec.error_t + _ERROR_GRACE_NS, "stream_error"
            if now >= deadline:
                self._watchdog = None
                self.timed_out = kind
                self.t_end = now
                task.cancel()
                return
            self._watchdog = loop.call_later((min(wake, deadline) - now) / 1e9, check)

        first_look_s = min(limits.first_token_s, limits.stall_s, limits.total_s)
        self._watchdog = loop.call_later(first_look_s, check)

    async def _read_response(self, response: door.Response) -> None:
        result = self.result
        t_headers = self.t_headers or perf_counter_ns()
        result.ttfb_ms = round((t_headers - self.t0) / 1e6, 3)
        result.http_status = code = response.status_code
        if not 200 <= code < 300:
            await self._read_http_error(response)
            return
        ctype = response.headers.get("content-type", "").lower()
        if "text/html" in ctype:
            body = await self._read_limited(response, 4096)
            self.t_end = perf_counter_ns()
            self.failure = (
                "protocol_error",
                http_errors.short(f"expected an event stream, got {ctype}: {body[:200]!r}"),
            )
            return
        if ctype.startswith("application/json"):
            await self._read_json_body(response)
            return

        self.streamed = True
        rec = self.rec
        feed = self.parser.feed
        max_bytes = self.req.limits.max_response_bytes
        reader = fastread.take_over(response, feed, lambda: rec.finished, max_bytes)
        if reader is not None:
            self.read_path = "transport"
            await reader.wait()
            self.t_end = rec.marker_t if rec.done_seen else (reader.t_done or perf_counter_ns())
            return
        self.read_path = "aiter_raw"
        n_bytes = 0
        # A compressed stream (we asked for none) is inflated here a step (64 KiB) at a
        # time, each step parsed and counted against the line and byte budgets before the
        # next is inflated: httpx's own decoder inflates each read whole (a bomb).
        decode = bounded.decoder(response.headers.get("content-encoding"))
        async for raw in response.aiter_raw():
            t = perf_counter_ns()  # stamp first: the earliest moment we saw these bytes
            for chunk in (raw,) if decode is None else decode(raw):
                feed(chunk, t)
                if rec.finished:
                    break
                # Checked after parsing: a read or a step is at most 64 KiB, and it counts.
                n_bytes += len(chunk)
                if n_bytes > max_bytes:
                    raise ResponseTooLarge(f"response larger than {max_bytes} bytes")
                if decode is not None:
                    await asyncio.sleep(0)  # a bomb's steps take turns with other streams
            if rec.finished:
                break
        self.t_end = rec.marker_t if rec.done_seen else perf_counter_ns()

    async def _read_limited(self, response: door.Response, limit: int) -> bytes:
        try:
            body, _ = await bounded.read_body(response, limit, truncate=True)
        except bounded.UnreadableBody as exc:
            return str(exc).encode()
        return body

    async def _read_http_error(self, response: door.Response) -> None:
        body = await self._read_limited(response, http_errors.ERROR_BODY_LIMIT)
        self.t_end = perf_counter_ns()
        code = response.status_code
        message, detail = http_errors.error_from_body(body)
        result = self.result
        result.error_detail = detail
        result.retry_after_s = http_errors.retry_after(response.headers)
        result.rate_limit = http_errors.rate_limit(response.headers)
        reason = response.reason_phrase or ""
        text = f"HTTP {code} {reason}".strip()
        self.failure = (
            http_errors.status_for_http(code),
            http_errors.short(f"{text}: {message}" if message else text),
        )

    async def _read_json_body(self, response: door.Response) -> None:
        """A 200 with a JSON body: an error object, or a server that did not stream."""
        body = await self._read_limited(response, http_errors.ERROR_BODY_LIMIT)
        self.t_end = perf_counter_ns()
        message, detail = http_errors.error_from_body(body)
        if isinstance(detail, dict) and isinstance(message, str) and b'"error"' in body:
            self.result.error_detail = detail
            self.failure = ("stream_error", message)
        else:
            self.failure = ("protocol_error", "server answered with JSON, not an event stream")

    def _finish(self, counts: Any, server_count: ServerCount | None = None) -> None:
        result, rec = self.result, self.rec
        result.connect_ms = self._connect_ms
        result.network_rtt_ms = self._tcp_ms
        result.tls_ms = self._tls_ms
        result.cold_connection = (not self.req.warm) or self._measured_request_connected
        try:
            fill_metrics(
                result,
                rec,
                self.t0,
                self.t_end,
                streamed=self.streamed,
                prices=self.req.prices,
                include_text=self.req.include_text,
                counts=counts,
                min_speed_tokens=self.req.min_speed_tokens,
                server_count=server_count,
                prompt_tokens=self.req.prompt_tokens,
                timeline_max=self.req.limits.stored_timeline_entries,
            )
        except Exception as exc:  # provider values no rule foresaw: the run still ends
            rec.protocol_error = rec.protocol_error or _unreadable(exc)
        self._judge_client(rec)
        if result.stream is not None:
            if self.tokenize_error is not None:
                result.stream["tokenize_error"] = self.tokenize_error
            result.stream["incomplete_event_discarded"] = self.parser.incomplete_event_discarded
            # Process CPU from t0 to the end of the read loop (all streams of the process).
            result.stream["client_cpu_ms"] = self._cpu_ms
            result.stream["read_path"] = self.read_path
            result.stream["warmup_error"] = self.warmup_error
        result.read_path = self.read_path
        status, error = self._status()
        result.status = status
        if error is not None and self.warmup_error is not None:
            # The same server already failed the warm-up: say so next to the failure.
            error = f"{error} (warm-up GET given up: {self.warmup_error})"
        if error is not None:
            result.error = error
        # Some providers and proxies echo the key (or a header token) anywhere: nothing we
        # return, store or print contains it. sanitize_result scrubs every string and
        # object (keys too) with the request's secrets (measure() put them in force)
        # before it cuts any to its column's length.
        sanitize.sanitize_result(result)
        result.reason = reasons.classify(result.status, result.error)

    def _judge_client(self, rec: StreamRecorder) -> None:
        """Record our loop's lag and whether it could have moved the run's figures."""
        lag, result = self.lag, self.result
        if lag is None:
            return
        result.loop_lag_first_ms = lag.first_ms
        result.loop_lag_max_ms = lag.max_ms
        decode_ms = None
        if rec.first_output_t is not None and rec.last_output_t is not None:
            decode_ms = (rec.last_output_t - rec.first_output_t) / 1e6
        ranks_on_speed = not result.short_output  # fill_metrics decided it
        result.client_bound = loop_lag.client_bound(lag, decode_ms, ranks_on_speed)

    def _status(self) -> tuple[str, str | None]:
        rec = self.rec
        if rec.protocol_error is not None:
            return "protocol_error", http_errors.short(rec.protocol_error)
        if rec.error is not None:
            self.result.error_detail = rec.error
            return "stream_error", http_errors.message_of(rec.error) or "error event in stream"
        if self.failure is not None:
            return self.failure
        if rec.complete(self.parser.incomplete_event_discarded):
            if self.result.output_events:
                return "ok", None
            return "empty", "stream completed without any output"
        if self.parser.incomplete_event_discarded:
            return "truncated", "stream ended inside an event"
        return "truncated", "stream ended without its completion marker"


def _unreadable(exc: Exception) -> str:
    return http_errors.short(f"unreadable response ({type(exc).__name__}: {exc})")


async def measure(req: ProbeRequest, turn: start_gate.Turn | None = None) -> RunResult:
    """Stream ``req`` once and return every metric of the methodology.

    Never raises for a failed measurement: the failure is the result's ``status``.
    Starts when no other stream of this loop is starting (``turn``: a share of a
    parallel group's turn).
    """

    async def one_stream() -> RunResult:
        # The start gate is taken here, inside the telemetry window, so the server
        # scrapes around the run never hold the loop's turn for other streams.
        start = start_gate.Member(turn or await start_gate.take_turn())
        try:
            return await _Measurement(req, start).run()
        finally:
            start.sent()

    # Every cut made for this request (error messages, stored strings) scrubs the
    # request's own key and header values first (scrub.py); the recorder adds the rest.
    with scrub.using(scrub.Scrubber(req.secrets())):
        if req.telemetry is None:
            return await one_stream()
        return await telemetry.observe(req, one_stream)


async def measure_all(reqs: list[ProbeRequest]) -> list[RunResult]:
    """Stream every request at once (a parallel workload); results in the same order."""
    if not reqs:
        return []
    turn = await start_gate.take_turn(len(reqs))
    try:
        return list(await asyncio.gather(*(measure(req, turn) for req in reqs)))
    finally:
        turn.close()  # members cancelled before they began never said sent()


def measure_sync(req: ProbeRequest) -> RunResult:
    """``measure`` from synchronous code: in a measuring process when the worker started
    some (measurers.py), else on the shared loop or a fresh event loop (safe in a Celery
    prefork worker or a script; from inside a running loop, on a helper thread).
    """
    if measurers.running():
        try:
            return measurers.measure(req)
        except measurers.MeasurerGone:
            pass  # the child died mid-run: measure again here rather than lose the slot
    return bounded.run_sync(lambda: measure(req))


def measure_all_sync(reqs: list[ProbeRequest]) -> list[RunResult]:
    """``measure_all`` from synchronous code, like ``measure_sync``."""
    if reqs and measurers.running():
        try:
            return measurers.measure_all(reqs)
        except measurers.MeasurerGone:
            pass
    return bounded.run_sync(lambda: measure_all(reqs))
