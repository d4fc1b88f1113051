"""One simulated streaming response: its events on the profile's schedule, the usage and
timing tail, and the profile's mid-stream fault if any.

Each stream reports the actual send times of its first and last output event in
``x_simulator`` so tests and benchmarks compare the client against the truth, not against
the plan.
"""

from __future__ import annotations

import random
import socket
import struct
import weakref
from collections import defaultdict
from time import perf_counter_ns
from typing import Any, Protocol

from . import content
from .events import OpenAIChatEvents
from .profiles import Profile


class Conn(Protocol):
    """What a stream uses of its connection (server.py's _Conn; a protocol, so the stream
    does not import the server that creates it: server -> stream, one way)."""

    server: Any  # the SimulatorServer: its stats and traits
    transport: Any  # the asyncio.Transport
    closed: bool
    prompt_tokens: int
    cached_tokens: int
    max_tokens: int
    request_metrics: bool

    def write_chunk(self, data: bytes) -> None: ...

    def end_chunked(self) -> None: ...


_MAX_BATCH = 512  # events per write when catching up (flood mode)


# Streams in flight per profile name, for Profile.contention (weak: a finished stream
# that is dropped leaves by itself).
_LIVE: defaultdict[str, weakref.WeakSet[Stream]] = defaultdict(weakref.WeakSet)


class Stream:
    """One streaming response on its schedule, with the profile's fault if any."""

    def __init__(
        self,
        conn: Conn,
        profile: Profile,
        events: Any,
        n_tokens: int,
        t_request: int,
        script: list[str] | None = None,
        tool_name: str | None = None,
    ) -> None:
        self.conn = conn
        self.p = profile
        self.events = events
        self.t_request = t_request
        # A fixed answer (JSON, tool-call arguments) as model tokens, else prose.
        self.script = script
        self.tool_name = tool_name
        endless = profile.fault == "endless"
        self.n_tokens = n_tokens
        k = profile.tokens_per_event
        self.n_events = -(-n_tokens // k) if not endless else None
        self.i = 0  # next output event
        ttft_ns = (
            profile.slow_ttft_s * 1e9
            if profile.fault == "slow_first_token"
            else profile.ttft_ms * 1e6
        )
        if profile.prefill_tps > 0:
            uncached = conn.prompt_tokens - conn.cached_tokens
            ttft_ns += uncached / profile.prefill_tps * 1e9
        self.next_due = t_request + int(ttft_ns)
        self.gap_ns = k / profile.tps * 1e9 if profile.tps > 0 else 0.0
        self._rng = random.Random(profile.seed) if profile.jitter_pct else None
        default_after = max(1, (self.n_events or 20) // 2)
        self.fault_after = profile.fault_after if profile.fault_after is not None else default_after
        self.t_first: int | None = None
        self.t_last: int | None = None
        self.paused = False
        self.done = False
        conn.server.stats.started(id(self))
        if profile.contention:
            _LIVE[profile.name].add(self)

    def _load(self) -> float:
        """How much slower than alone this stream runs now: 1 + contention per other
        stream of the profile still in flight."""
        if not self.p.contention:
            return 1.0
        others = sum(1 for s in _LIVE[self.p.name] if s is not self and s.live)
        return 1.0 + self.p.contention * others

    @property
    def live(self) -> bool:
        return not self.done and not self.conn.closed

    def _gap(self) -> float:
        gap = self.gap_ns * self._load()
        if self._rng is not None:
            j = self.p.jitter_pct / 100.0
            gap *= 1.0 + self._rng.uniform(-j, j)
        server = self.conn.server
        if server.traits.batch_tps:  # a batched GPU: the streams in flight share its rate
            shared = self.p.tokens_per_event * len(server.stats.active) / server.traits.batch_tps
            gap = max(gap, shared * 1e9)
        return gap

    def emit(self) -> int | None:
        """Write every event now due; return the next deadline, or None when finished."""
        if self.done or self.conn.closed:
            return None
        if self.paused:
            return None  # resumed by the connection's resume_writing()
        p, k = self.p, self.p.tokens_per_event
        now = perf_counter_ns()
        parts: list[bytes] = []
        first_in_batch = self.i
        fault = p.fault
        while self.next_due <= now and len(parts) < _MAX_BATCH:
            if self.n_events is not None and self.i >= self.n_events:
                break
            if self.i == self.fault_after and fault in _MID_STREAM:
                return self._fault(parts, first_in_batch)
            start = self.i * k
            count = k if self.n_events is None else min(k, self.n_tokens - start)
            reasoning = start < p.reasoning_tokens
            if reasoning:
                count = min(count, p.reasoning_tokens - start)
            parts.append(self._event(start, count, reasoning))
            self.i += 1
            self.next_due += int(self._gap())
        if parts:
            self.conn.write_chunk(b"".join(parts))
            t = perf_counter_ns()
            if first_in_batch == 0:
                self.t_first = t
            self.t_last = t
        if self.n_events is not None and self.i >= self.n_events:
            self._finish(done=fault != "no_done")
            return None
        return self.next_due

    def _event(self, start: int, count: int, reasoning: bool) -> bytes:
        p = self.p
        if reasoning:
            return self.events.output(content.prose(start, count, p.vocab), True)
        if self.script is None:
            text = content.prose(start, count, p.vocab, p.sentence_tokens)
            return self.events.output(text, False)
        # Scripted output starts after the reasoning tokens (if any).
        at = start - min(p.reasoning_tokens, start)
        text = "".join(self.script[at : at + count])
        if self.tool_name is None:
            return self.events.output(text, False)
        return self.events.tool(text, self.tool_name if at == 0 else None)

    def _fault(self, parts: list[bytes], first_in_batch: int) -> int | None:
        conn, fault = self.conn, self.p.fault
        if parts:
            conn.write_chunk(b"".join(parts))
            self.t_last = perf_counter_ns()
            if first_in_batch == 0:
                self.t_first = self.t_last
        self.done = True
        conn.server.stats.ended(id(self))
        if fault == "stall":
            return None  # keep the connection open, send nothing more
        if fault == "disconnect":
            conn.transport.close()  # FIN after the buffered bytes: body left incomplete
        elif fault == "reset":
            sock = conn.transport.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.transport.abort()
        elif fault == "truncate":
            conn.end_chunked()
        elif fault == "error_event":
            conn.write_chunk(
                self.events.error()
                + (b"data: [DONE]\n\n" if isinstance(self.events, OpenAIChatEvents) else b"")
            )
            conn.end_chunked()
        else:  # malformed_json, invalid_utf8, huge_event: one bad event, then carry on
            bad = {
                "malformed_json": self.events.malformed,
                "invalid_utf8": self.events.invalid_utf8,
                "huge_event": self.events.huge,
            }[fault]()
            conn.write_chunk(bad)
            self.done = False
            self.fault_after = -1
            return self.next_due
        return None

    def _finish(self, done: bool) -> None:
        self.done = True
        p = self.p
        t_first = self.t_first or perf_counter_ns()
        t_last = self.t_last or t_first
        reasoning = min(p.reasoning_tokens, self.n_tokens)
        usage = {
            "prompt_tokens": self.conn.prompt_tokens,
            "completion_tokens": self.n_tokens,
            "total_tokens": self.conn.prompt_tokens + self.n_tokens,
            "prompt_tokens_details": {"cached_tokens": self.conn.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        }
        prefill_s, decode_s = (t_first - self.t_request) / 1e9, (t_last - t_first) / 1e9
        server = self.conn.server
        server.stats.finished(
            id(self), 0.0, prefill_s, decode_s, self.conn.prompt_tokens,
            self.conn.cached_tokens, self.n_tokens,
        )  # fmt: skip
        timing: dict[str, Any] = {
            "time_info": {
                "queue_time": 0.0,
                "prompt_time": prefill_s,
                "completion_time": decode_s,
                "total_time": (t_last - self.t_request) / 1e9,
            },
            "x_simulator": {
                "t_request_ns": self.t_request,
                "t_first_ns": t_first,
                "t_last_ns": t_last,
                "output_events": self.i,
                "output_tokens": self.n_tokens,
                "first_event_tokens": min(p.tokens_per_event, self.n_tokens),
                "tps": p.tps,
                "ttft_ms": p.ttft_ms,
            },
        }
        if server.traits.metrics and not self.conn.request_metrics:
            timing["time_info"] = None  # its figures are in /metrics, not the response
        finish = "length" if self.n_tokens >= self.conn.max_tokens else "stop"
        if self.tool_name is not None and finish == "stop":
            finish = "tool_calls"
        eval_count = self.n_tokens if p.usage == "eval_count" else None
        sent_usage = usage if p.usage == "full" else None
        if not self.conn.server.traits.usage and isinstance(self.events, OpenAIChatEvents):
            sent_usage = None
        self.conn.write_chunk(self.events.tail(finish, sent_usage, timing, done, eval_count))
        self.conn.end_chunked()


_MID_STREAM = frozenset(
    {
        "stall",
        "disconnect",
        "reset",
        "malformed_json",
        "error_event",
        "truncate",
        "huge_event",
        "invalid_utf8",
    }
)
