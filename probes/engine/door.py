"""The one door out: every outbound HTTP request Inferwatch makes gets its client here.

Probes and their warm-ups (client.py), tokenizer routes (tokenize.py), a self-hosted
server's /metrics and power reads (telemetry.py), Add an endpoint's side requests and
Test connection (probes/onboarding/connection_check.py), alert deliveries
(dashboard/alerts/transports) and the OTLP push (probes/platform/otel.py) all open their
connections through ``async_client`` (or ``request_sync`` on top of it). Each rule is
applied here once, so a new feature cannot forget one:

* the egress policy (egress.py), judged by pinned.py at the address each connection opens and
  pinned to it: metadata and link-local always refused, EGRESS_DENY / EGRESS_ALLOW;
* no redirects: a 3xx is an answer, never a second request to wherever it points;
* time bounds on connect, write and pool waits (``request`` adds one total deadline);
* size bounds on bodies (``request`` and ``request_sync``, bounded.py);
* a key goes only to the origin (scheme, host, port) it is bound to (``KeyBinding``),
  checked on every request as it is sent: a URL changed behind the model's back (a bulk
  update, SQL), or a redirect a caller chose to follow, does not carry it.

No other module of ours imports an HTTP client or opens a socket: tests/test_doors.py
fails the build if one does. Callers catch the errors re-exported below.
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx import (  # noqa: F401 - re-exported: callers catch these, never import httpx
    ConnectError,
    ConnectTimeout,
    DecodingError,
    Headers,
    HTTPError,
    InvalidURL,
    LocalProtocolError,
    PoolTimeout,
    RemoteProtocolError,
    Response,
    TimeoutException,
    UnsupportedProtocol,
)

from . import bounded, pinned
from .bounded import BoundedError, BoundedResponse, DeadlineExceeded  # noqa: F401
from .origins import origin

AsyncClient = httpx.AsyncClient  # for type hints; make one with async_client()


class KeyRefused(httpx.ConnectError):
    """A request that would carry a key to an origin it is not bound to: not sent. An
    httpx.ConnectError, so every caller's connection-error handling applies."""


@dataclass(frozen=True)
class KeyBinding:
    """A secret and the one origin it may be sent to. `repr` leaves the secret out."""

    secret: str = field(repr=False)
    origin: str

    def refusal(self, url: str, carried: str) -> str | None:
        """Why a request to `url` carrying `carried` (its URL and header values) may not
        be sent, or None."""
        if not self.secret or self.secret not in carried:
            return None
        where = origin(url)
        if where == self.origin:
            return None
        return (
            f"key policy: the key is bound to {self.origin or 'no origin'}, not {where}; "
            "not sent (a superuser binds it again by saving the provider)"
        )


def check_keys(url: str, headers: Any, bindings: Sequence[KeyBinding]) -> None:
    """KeyRefused when a bound secret would travel in `url` or `headers` elsewhere."""
    if not bindings:
        return
    carried = "\n".join([url, *(str(v) for _, v in headers.items())])
    for binding in bindings:
        why = binding.refusal(url, carried)
        if why:
            raise KeyRefused(why)


class _KeyGuard(httpx.AsyncBaseTransport):
    """The transport's last step before the wire: the key check, per request."""

    def __init__(self, inner: httpx.AsyncBaseTransport, bindings: Sequence[KeyBinding]):
        self._inner = inner
        self._bindings = tuple(bindings)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        check_keys(str(request.url), request.headers, self._bindings)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def async_client(
    *,
    connect_s: float = 10.0,
    read_s: float | None = None,
    max_connections: int | None = None,
    verify: ssl.SSLContext | bool = True,
    keys: Sequence[KeyBinding] = (),
) -> httpx.AsyncClient:
    """The only way to get an HTTP client: policy-checked, pinned connections, no
    redirects, bounded connect / write / pool waits (``read_s`` None: the caller bounds
    reads, as the engine's watchdog and ``request``'s deadline do), and `keys` sent only
    to their origins."""
    limits = httpx.Limits(  # httpx's own defaults unless the caller names a cap
        max_connections=max_connections or 100, max_keepalive_connections=max_connections or 20
    )
    transport = pinned.async_transport(limits=limits, verify=verify)
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=connect_s, read=read_s, write=connect_s, pool=connect_s),
        follow_redirects=False,
        transport=_KeyGuard(transport, keys),
    )


async def request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    deadline_s: float,
    max_bytes: int,
    **kwargs: Any,
) -> BoundedResponse:
    """One exchange on a door client within ``deadline_s`` in total and ``max_bytes`` of
    body (bounded.bounded_request: BoundedError subclasses, or HTTPError)."""
    return await bounded.bounded_request(
        client, method, url, deadline_s=deadline_s, max_bytes=max_bytes, **kwargs
    )


def request_sync(
    method: str,
    url: str,
    *,
    deadline_s: float,
    max_bytes: int,
    verify: ssl.SSLContext | bool = True,
    keys: Sequence[KeyBinding] = (),
    **kwargs: Any,
) -> BoundedResponse:
    """``request`` on a client of its own, for synchronous callers (alert transports,
    side requests, the OTLP push)."""

    async def go() -> BoundedResponse:
        async with async_client(connect_s=deadline_s, verify=verify, keys=keys) as client:
            return await request(
                client, method, url, deadline_s=deadline_s, max_bytes=max_bytes, **kwargs
            )

    return bounded.run_sync(go)


def refusal_in(exc: BaseException) -> str | None:
    """The door's own refusal (egress or key policy) carried by an error, else None."""
    text = str(exc)
    return text if text.startswith(("egress policy:", "key policy:")) else None
