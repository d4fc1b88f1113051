"""The server's own view around a run: its /metrics and its power counter (plain Python).

``observe`` reads the server's /metrics and the power source before the run and after it
(outside the timed window: the run's figures are untouched), each read bounded in time
and bytes; a failed read never fails the run, it is noted in ``server_timing``. The
figures go on the run: the server's queue, prefill and decode time and load
(servermetrics.py), and the energy over the window (energy.py).

Per-request figures the engine put in the response itself (server_timing from the
stream) are the request's own: they are kept, preferred over the window's deltas.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from . import bounded, door, energy, json_budget, servermetrics, tokens
from .result import RunResult

MAX_BYTES = 4 * 1024 * 1024  # a vLLM /metrics with many models is some 100 kB
POWER_MAX_NODES = 20_000  # a Prometheus query's series, each a handful of values


@dataclass(frozen=True)
class Telemetry:
    """Where to read a self-hosted server's side of a run."""

    server_metrics_url: str | None = None  # the engine's Prometheus /metrics
    # A DCGM exporter's /metrics, or with power_query a Prometheus /api/v1/query URL.
    power_url: str | None = None
    power_query: str | None = None  # an energy-counter expression in joules
    power_selector: str = ""  # LABEL=VALUE of the GPUs to sum (DCGM), empty: all
    # The power between the previous run and this one (the observatory remembers the
    # counter), watts: the idle, unless others used the server meanwhile.
    previous_energy: tuple[float, float] | None = None  # (joules, wall-clock seconds)
    deadline_s: float = 3.0

    def __post_init__(self) -> None:
        energy.parse_selector(self.power_selector)  # SelectorError on a bad one
        for url in (self.server_metrics_url, self.power_url):
            if url and not url.startswith(("http://", "https://")):
                raise ValueError(f"a metrics URL starts with http:// or https://: {url[:80]!r}")


@dataclass
class _Scrape:
    samples: servermetrics.Samples | None = None
    energy: energy.EnergyReading | None = None
    errors: tuple[str, ...] = ()


async def _get(client: door.AsyncClient, url: str, tel: Telemetry, **kw: Any) -> bytes:
    response = await door.request(
        client, "GET", url, deadline_s=tel.deadline_s, max_bytes=MAX_BYTES, **kw
    )
    if response.status_code != 200:
        raise NotOk(response.status_code)
    return response.body


class NotOk(bounded.BoundedError):
    """A metrics or power read answered another status than 200."""

    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status


async def _power(client: door.AsyncClient, tel: Telemetry) -> energy.EnergyReading | None:
    assert tel.power_url is not None
    sent = time.time()
    if tel.power_query:  # a Prometheus server: the expression's value(s), in J
        body = await _get(client, tel.power_url, tel, params={"query": tel.power_query})
        answer = json_budget.loads(body, POWER_MAX_NODES)  # a few series, never a bomb
        series = answer["data"]["result"]
        joules = sum(float(s["value"][1]) for s in series)
        at_s = (sent + time.time()) / 2
        return energy.EnergyReading(joules, max(1, len(series)), at_s) if series else None
    text = (await _get(client, tel.power_url, tel)).decode("utf-8", "replace")
    selector = energy.parse_selector(tel.power_selector)
    # Read at the middle of the exchange: the counter's instant is somewhere inside it.
    at_s = (sent + time.time()) / 2
    return energy.dcgm_reading(servermetrics.parse(text), selector, at_s)


def read_failure(exc: Exception) -> str:
    """Why a read failed, in our words only: the note is shown on the run and endpoint
    pages, and an exception's text can quote the body (an internal /metrics answering
    "invalid metric name: secret-role-name", a float that was 'INTERNAL-SECRET')."""
    if isinstance(exc, NotOk):
        return f"answered HTTP {exc.status}"
    if isinstance(exc, door.TimeoutException | bounded.DeadlineExceeded):
        return "timed out"
    if isinstance(exc, bounded.BodyTooLarge):
        return f"answer larger than {MAX_BYTES} bytes"
    if isinstance(exc, door.HTTPError | OSError | bounded.BoundedError):
        return "could not be read (connection failed or refused by policy)"
    if isinstance(exc, ValueError | KeyError | IndexError | TypeError):
        return "not in the expected format (Prometheus text, or a Prometheus query answer)"
    return f"could not be read ({type(exc).__name__})"


# The notes read_failure writes (and "no energy counter"): runs stored before it quoted
# the server, and only notes of these forms are shown to visitors (public_notes).
_OUR_NOTE = re.compile(
    r"(server metrics|power): (timed out|answered HTTP \d{3}|answer larger than \d+ bytes"
    r"|could not be read( \(connection failed or refused by policy\)| \(\w+\))"
    r"|not in the expected format \(Prometheus text, or a Prometheus query answer\)"
    r"|no energy counter for the selector)"
)


def public_notes(errors: list[str]) -> list[str]:
    """A run's telemetry notes as visitors may see them: ours as they are, any other
    (stored before the notes were ours) as a plain "could not be read"."""
    return [
        e if _OUR_NOTE.fullmatch(e) else f"{e.split(':', 1)[0][:20]}: could not be read"
        for e in errors
    ]


async def scrape(client: door.AsyncClient, tel: Telemetry) -> _Scrape:
    out = _Scrape()
    errors: list[str] = []
    if tel.server_metrics_url:
        try:
            text = await _get(client, tel.server_metrics_url, tel)
            out.samples = servermetrics.parse(text.decode("utf-8", "replace"))
        except Exception as exc:  # untrusted server: any failure is a note, not a crash
            errors.append(f"server metrics: {read_failure(exc)}")
    if tel.power_url:
        try:
            out.energy = await _power(client, tel)
            if out.energy is None:
                errors.append("power: no energy counter for the selector")
        except Exception as exc:
            errors.append(f"power: {read_failure(exc)}")
    out.errors = tuple(errors)
    return out


async def observe(req: Any, run: Callable[[], Awaitable[RunResult]]) -> RunResult:
    """``run()`` between two reads of the server's metrics and power counter."""
    tel: Telemetry = req.telemetry
    tokens.encoding()  # loaded now: a first load (seconds) must not sit inside the window
    # Through the one door out, like the probe: a metrics or power URL pointing at a
    # refused address (metadata, EGRESS_DENY) is refused at the connection.
    async with door.async_client(connect_s=tel.deadline_s) as client:
        before = await scrape(client, tel)
        result = await run()
        after = await scrape(client, tel)
    apply(result, tel, before, after)
    return result


def _server_side(result: RunResult, before: _Scrape, after: _Scrape, note: dict) -> None:
    if before.samples is None or after.samples is None:
        return
    engine = servermetrics.detect(after.samples)
    note["engine"] = engine
    note["lacks"] = servermetrics.lacks(engine)
    if engine is None:
        return
    window = servermetrics.server_window(
        engine, before.samples, after.samples, result.output_tokens, result.input_tokens
    )
    note["finished"] = window.finished
    result.server_running_requests = window.running
    result.server_waiting_requests = window.waiting
    result.server_kv_cache_pct = window.kv_cache_pct
    result.server_prefix_hit_pct = window.prefix_hit_pct
    if result.server_prefill_ms is not None or result.server_decode_ms is not None:
        result.server_window = "per-request"  # the response's own figures win
        return
    result.server_window = window.window or None
    result.server_queue_ms = window.queue_ms
    result.server_prefill_ms = window.prefill_ms
    result.server_decode_ms = window.decode_ms
    parts = [window.queue_ms, window.prefill_ms, window.decode_ms]
    if window.window and any(p is not None for p in parts):
        result.server_total_ms = round(sum(p for p in parts if p is not None), 3)


def apply(result: RunResult, tel: Telemetry, before: _Scrape, after: _Scrape) -> None:
    """Put the server's side of the window on the run (noted in server_timing too)."""
    note: dict[str, Any] = {}
    errors = before.errors + after.errors
    if errors:
        note["errors"] = list(dict.fromkeys(errors))
    _server_side(result, before, after, note)
    e0, e1 = before.energy, after.energy
    if e0 is not None and e1 is not None:
        run_energy = energy.delta_j(e0, e1)
        seconds = e1.at_s - e0.at_s
        idle_w = _idle_w(tel.previous_energy, e0)
        result.energy_j = run_energy.energy_j
        result.energy_window = "shared" if _others_ran(result) else "exact"
        if result.server_window is None and tel.server_metrics_url is None:
            result.energy_window = None  # no server metrics: who else ran is unknown
        figures = energy.per_token(result.energy_j, result.output_tokens, seconds, idle_w)
        for name, value in figures.items():
            setattr(result, name, value)
        note["energy"] = {
            "before_j": e0.joules,
            "after_j": e1.joules,
            "at_s": e1.at_s,
            "window_s": round(seconds, 4),
            "idle_w": None if idle_w is None else round(idle_w, 3),
            "reset": run_energy.reset,
        }
    if note:
        result.server_timing = {**(result.server_timing or {}), "metrics": note}


def _others_ran(result: RunResult) -> bool:
    return result.server_window == "shared" or bool(result.server_running_requests)


def _idle_w(previous: tuple[float, float] | None, now: energy.EnergyReading) -> float | None:
    """Watts between the previous run's last reading and this run's first."""
    if previous is None:
        return None
    joules, at_s = previous
    seconds = now.at_s - at_s
    if seconds < 0.5 or now.joules < joules:  # too short to tell, or a reset between
        return None
    watts = (now.joules - joules) / seconds
    return watts if watts <= energy.MAX_WATTS * now.devices else None
