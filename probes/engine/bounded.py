"""Bounded HTTP requests: one total deadline and a byte limit for every request we make
to a server we do not control (the warm-up GET, tokenize calls, webhooks).

Per-read timeouts are not enough: a server that sends its headers and then one byte a
second never trips one, and an endless body grows the process until it dies. So the
whole exchange (connect, send, headers, body) runs under a single deadline, and the body
is read raw and counted; a compressed body is inflated in steps of at most
``INFLATE_STEP`` bytes, each counted against the byte (and the stream's line) budgets
before the next is inflated, so a decompression bomb stops at the same limits, never
holding more than a step of output.

Plain Python (httpx + asyncio): usable from the engine, probes and dashboard alike.

    response = await bounded_request(client, "GET", url, deadline_s=5, max_bytes=1 << 20)

The client comes from the door (door.py: ``async_client``, or ``request_sync`` for
synchronous callers); this module makes none of its own.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from . import json_budget, shared_loop

T = TypeVar("T")


class BoundedError(Exception):
    """The request broke one of its bounds; the message says which, in plain words."""


class DeadlineExceeded(BoundedError):
    pass


class BodyTooLarge(BoundedError):
    pass


class UnreadableBody(BoundedError):
    """A content-encoding we did not ask for and cannot inflate safely."""


@dataclass(frozen=True)
class BoundedResponse:
    status_code: int
    reason_phrase: str
    headers: httpx.Headers
    body: bytes
    truncated: bool = False  # only with truncate=True: the body was cut at max_bytes

    def json(self, max_nodes: int = 20_000, max_containers: int | None = None) -> Any:
        """The body's JSON within a budget of values (json_budget.py): JSONTooLarge, a
        ValueError, for a bomb."""
        return json_budget.loads(self.body, max_nodes, max_containers)


# What one inflation step may produce: a socket read's worth. 64 KiB of compressed input
# can inflate to 64 MiB; it is produced (and parsed, and counted) a step at a time.
INFLATE_STEP = 64 * 1024


class _Inflater:
    """gzip / zlib inflation in steps of at most INFLATE_STEP bytes of output."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(wbits=zlib.MAX_WBITS | 32)  # gzip or zlib header

    def __call__(self, data: bytes) -> Iterator[bytes]:
        """``data`` inflated, a step at a time: the caller counts each step against its
        budgets, and stops asking (closes the iterator) when one is spent."""
        z = self._z
        while True:
            try:
                out = z.decompress(data, INFLATE_STEP)
            except zlib.error as exc:
                raise UnreadableBody(f"compressed body is corrupt: {exc}") from None
            if not out:
                return
            yield out
            data = z.unconsumed_tail  # what the step's cap left; empty: flush what is held


def decoder(encoding: str | None) -> Callable[[bytes], Iterator[bytes]] | None:
    """``steps(data)`` for a content-encoding (None for identity): the inflated bytes in
    steps of at most INFLATE_STEP. UnreadableBody for an encoding we cannot inflate safely."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip", "deflate"):
        return _Inflater()
    raise UnreadableBody(f"unsupported content-encoding {encoding[:40]!r}")


async def read_body(
    response: httpx.Response, max_bytes: int, *, truncate: bool = False
) -> tuple[bytes, bool]:
    """At most ``max_bytes`` of ``response``'s (decoded) body: (body, truncated).

    Over the limit: BodyTooLarge, or with ``truncate`` the first max_bytes and True.
    """
    decode = decoder(response.headers.get("content-encoding"))
    parts: list[bytes] = []
    size = 0
    async for raw in response.aiter_raw():
        for chunk in decode(raw) if decode is not None else (raw,):
            parts.append(chunk)
            size += len(chunk)
            if size > max_bytes:  # counted a step at a time: nothing more is inflated
                if truncate:
                    return b"".join(parts)[:max_bytes], True
                raise BodyTooLarge(f"response body larger than {max_bytes} bytes")
    return b"".join(parts), False


async def bounded_request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    deadline_s: float,
    max_bytes: int,
    truncate: bool = False,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> BoundedResponse:
    """``client.stream(method, url, ...)`` read whole, within ``deadline_s`` in total.

    Raises DeadlineExceeded, BodyTooLarge (unless ``truncate``), UnreadableBody, or
    httpx.HTTPError for connection and protocol failures.
    """
    headers = {"accept-encoding": "identity", **(headers or {})}
    try:
        async with asyncio.timeout(deadline_s):
            async with client.stream(method, url, headers=headers, **kwargs) as response:
                body, truncated = await read_body(response, max_bytes, truncate=truncate)
    except TimeoutError:
        raise DeadlineExceeded(f"no complete response within {deadline_s:g} s") from None
    return BoundedResponse(
        status_code=response.status_code,
        reason_phrase=response.reason_phrase or "",
        headers=response.headers,
        body=body,
        truncated=truncated,
    )


def run_sync(make: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine ``make()`` to completion, blocking the caller.

    In a process with a shared loop (a threads-pool worker: shared_loop.py) it runs
    there, beside every other measurement of the process. Otherwise on a fresh event
    loop; called from inside a running loop (a test, an async view), on a helper thread
    with its own loop. Exceptions are re-raised in the caller's thread.
    """
    if shared_loop.running() and not shared_loop.on_loop_thread():
        return shared_loop.run(make)
    try:
        asyncio.get_running_loop()
        in_a_loop = True
    except RuntimeError:
        in_a_loop = False
    if not in_a_loop:  # (outside the except block: its errors are not chained to this one)
        return asyncio.run(make())  # type: ignore[arg-type]
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(make())  # type: ignore[arg-type]
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="inferwatch-bounded")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]
