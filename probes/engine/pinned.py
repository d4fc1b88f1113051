"""The egress policy at each connection: resolve once, check every address, connect to
the checked one (the policy itself: egress.py).

The host is resolved once per connection, every address it resolves to is checked (one
refused address refuses the host), and the connection is opened to the checked address:
DNS cannot answer the check with one address and the connection with another. TLS still
verifies and sends SNI for the hostname (httpcore starts TLS with the origin's host).

Part of the one door out (door.py): only door.py makes clients with these transports.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpx

from . import egress


class EgressRefused(httpcore.ConnectError):
    """A connection the policy refuses. An httpcore.ConnectError, so httpx raises it as
    httpx.ConnectError with this message and every caller's connection-error handling
    (a probe's network_error, a channel's failed delivery) applies unchanged."""


def check_addresses(host: str, addresses: Iterable[str]) -> list[str]:
    """The addresses to connect to, or EgressRefused when any is refused: a host that
    resolves partly into a refused range is refused whole (which address a client picks
    is not ours to predict)."""
    chosen = list(dict.fromkeys(addresses))
    if host.lower().rstrip(".") in egress.METADATA_NAMES:
        raise EgressRefused(f"egress policy: {host} is a cloud metadata service, always refused")
    if not chosen:
        raise EgressRefused(f"egress policy: {host} resolves to no address")
    policy = egress.current()
    for address in chosen:
        why = policy.refusal(address)
        if why:
            via = "" if egress.literal(host) else f"{host} resolves to {address}; "
            raise EgressRefused(f"egress policy: {via}{why}")
    return chosen


def _lookup(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
    return [str(info[4][0]) for info in infos]


async def resolve_checked_async(host: str, port: int, timeout: float | None) -> list[str]:
    literal = egress.literal(host)
    if literal is not None:
        return check_addresses(host, [literal])
    try:
        with anyio.fail_after(timeout):
            # A thread, as asyncio's own resolver uses: getaddrinfo blocks.
            found = await anyio.to_thread.run_sync(_lookup, host, port, abandon_on_cancel=True)
    except TimeoutError:
        raise httpcore.ConnectTimeout(f"resolving {host} took over {timeout} s") from None
    return check_addresses(host, found)


class PinnedAsyncBackend(httpcore.AsyncNetworkBackend):
    """httpcore's own backend, connecting to the checked address instead of the name."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kw: Any):
        addresses = await resolve_checked_async(host, port, timeout)
        # The first address only: trying the next on failure would be a second answer.
        return await self._inner.connect_tcp(addresses[0], port, timeout=timeout, **kw)

    async def connect_unix_socket(self, *args: Any, **kwargs: Any):
        raise EgressRefused("egress policy: unix sockets are not an outbound destination")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def async_transport(**kwargs: Any) -> httpx.AsyncHTTPTransport:
    """An httpx transport whose every connection passes the policy. Pass the TLS and
    pool options here (`verify=`, `limits=`): a client given a transport ignores its own."""
    transport = httpx.AsyncHTTPTransport(**kwargs)
    # httpx 0.28 builds httpcore's pool without a way to name the network backend.
    transport._pool._network_backend = PinnedAsyncBackend()  # type: ignore[attr-defined]
    return transport
