"""Streams start one at a time per event loop; once started, any number stream at once.

Why: starting a stream costs the loop a few milliseconds of Python (a client, the warm-up
GET, building and sending the request) in many small steps, and the loop runs everyone's
ready steps in turn. When 64 streams start together on one loop (a threads-pool worker's
shared loop, probes/engine/shared_loop.py), a stream's first token waits behind the others'
start-up steps: measured on a 2-core VM, TTFT came out ~190 ms late and tok/s 1-2 % high
(the first token stamped late shortens the span). One start at a time keeps at most one
start-up step queued ahead of anyone's bytes. The wait happens before the stream's t0,
so it is never measured; it delays a start by the start-ups ahead of it (a few ms each
against a local server, a round trip or three to a remote one for the warm-up).

A parallel group's requests are one start (measure_all): they start together, as the
workload means them to, and the next stream waits until all of them are sent. Inside the
group, each member warms up its connection, then waits until every member has (`go`),
and then they send in turn, each the moment the one before has sent: the loop holds
nothing else then, so a member's t0 is stamped right before its own bytes leave. Let
loose together, 64 members' warm-ups and sends interleaved, and each request left ~25 ms
after its t0 on a 2-core VM (that delay is ours, yet it was counted in the provider's
TTFT). In turn, each leaves ~0.3 ms after its t0, and the last of 64 about 0.1 s after the
first (the loop reads the first ones' tokens between sends): "together" within a tenth of
a second of multi-second streams, each timed from its own start.
"""

from __future__ import annotations

import asyncio
import weakref

_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


class Turn:
    """A turn to start `members` streams; each says `sent()` once its request is out (or
    once it gave up), and the next turn begins after the last of them."""

    def __init__(self, gate: asyncio.Lock, members: int) -> None:
        self._gate = gate
        self._left = members
        self._not_ready = members  # members not yet at their t0 (nor gone)
        self._all_ready = asyncio.Event()
        self._relay = asyncio.Lock()  # held from a member's t0 until its request is out
        if members <= 1:
            self._all_ready.set()

    def ready(self) -> None:
        """One member is at its t0 (or gone before it)."""
        self._not_ready -= 1
        if self._not_ready <= 0:
            self._all_ready.set()

    async def take_send(self) -> None:
        """Wait until every member is ready and no other member is sending."""
        await self._all_ready.wait()
        await self._relay.acquire()

    def end_send(self) -> None:
        self._relay.release()

    def sent(self) -> None:
        self._left -= 1
        if self._left == 0:
            self._gate.release()

    def close(self) -> None:
        """End the turn whatever its members said (they were cancelled, say)."""
        self._all_ready.set()
        if self._left > 0:
            self._left = 0
            self._gate.release()


class Member:
    """One stream's share of a turn: `sent()` is idempotent, so the trace hook and the
    stream's `finally` may both call it."""

    def __init__(self, turn: Turn) -> None:
        self._turn: Turn | None = turn
        self._is_ready = False
        self._holds_relay = False

    async def go(self) -> None:
        """Wait until this member may stamp its t0 and send: every member of its turn is
        ready (warmed up, or gone), and the one before it has sent."""
        turn = self._turn
        if turn is None:
            return
        self._ready(turn)
        await turn.take_send()
        self._holds_relay = True

    def sent(self) -> None:
        turn, self._turn = self._turn, None
        if turn is not None:
            self._ready(turn)  # a member gone before its t0 holds no one up
            if self._holds_relay:
                self._holds_relay = False
                turn.end_send()
            turn.sent()

    def _ready(self, turn: Turn) -> None:
        if not self._is_ready:
            self._is_ready = True
            turn.ready()


async def take_turn(members: int = 1) -> Turn:
    """Wait until no other start is under way on this loop, then start `members`."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Lock()
    await gate.acquire()
    return Turn(gate, members)
