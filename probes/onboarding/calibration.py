"""How fast can this process ingest a stream accurately? (the machine's own ceiling)

Two runs against a local simulator in a child process (so it does not steal our CPU):
a flood (events sent as fast as the socket takes them) gives the most events per second
this process can parse; a paced run at a safe fraction of that checks the error there.
Results that approach the ceiling can then be flagged instead of trusted.

The paced run checks our parsing, not the machine's other tenants. When either side
went without a core while it ran, the error it shows is the neighbour's: our client says
so itself (``client_bound``: its loop was held while it read), and the simulator's own
stamps show it (its first event left late, or its rate strayed from the one asked: a
stamp taken just after a write is late by however long the process waited for a core
in between). Such a run is measured again, up to `VERIFY_TRIES` times, and the report
says whether the run it kept was clean.
"""

from __future__ import annotations

import dataclasses
import platform
import sys
import time
from dataclasses import dataclass
from typing import Any

from probes.engine import METHODOLOGY_VERSION, Limits, ProbeRequest
from probes.engine.loop_lag import SPEED_BOUND_PCT, TTFT_BOUND_MS
from probes.simulator import start_in_process

# Measured (README, Benchmarks): keep a process's total event rate under ~45 % of its flood
# capacity to stay accurate.
SAFE_FRACTION = 0.45
VERIFY_TRIES = 3
PACED_TTFT_MS = 50


@dataclass
class Calibration:
    flood_events_per_s: float  # most output events/s one stream is parsed at
    cpu_us_per_event: float  # process CPU per event during the flood run (all included)
    accurate_events_per_s: float  # SAFE_FRACTION of the flood rate, for all streams together
    accurate_tok_s: float  # the same at one token per event
    verified_tps_error_pct: float | None  # measured vs true rate at accurate_events_per_s
    verified_ttft_error_ms: float | None
    verified_clean: bool  # neither side of the kept paced run went without a core
    verified_tries: int  # paced runs measured to get a clean one (at most VERIFY_TRIES)
    duration_s: float
    python: str
    machine: str
    methodology_version: int = METHODOLOGY_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _true_rate(result: Any) -> tuple[float | None, float | None]:
    """(true tok/s, true TTFT ms) from the simulator's x_simulator report."""
    sim = (result.usage or {}).get("x_simulator") if result.usage else None
    if sim is None or result.t0_ns is None:
        return None, None
    span = (sim["t_last_ns"] - sim["t_first_ns"]) / 1e9
    tps = (sim["output_tokens"] - sim["first_event_tokens"]) / span if span > 0 else None
    return tps, (sim["t_first_ns"] - result.t0_ns) / 1e6


def _clean(result: Any, true_tps: float | None, asked_tps: float) -> bool:
    """Did neither our client nor the simulator go without a core during this run?"""
    sim = (result.usage or {}).get("x_simulator")
    if result.status != "ok" or result.client_bound or sim is None or true_tps is None:
        return False
    late_ms = (sim["t_first_ns"] - sim["t_request_ns"]) / 1e6 - PACED_TTFT_MS
    return 0 <= late_ms <= TTFT_BOUND_MS and abs(true_tps / asked_tps - 1) * 100 <= SPEED_BOUND_PCT


def _limits(events: int, duration_s: float) -> Limits:
    """Room for the calibration's own streams. They come from our simulator, not a
    provider, and a flood of several seconds is more events than a provider's run may
    send (a 6 s one is 120,000, past the 100,000 of max_output_events): without this
    the worker's calibration failed on every machine, and a paced run of a fast one."""
    base = Limits()
    return dataclasses.replace(
        base,
        total_s=max(60.0, duration_s * 4),
        max_output_events=max(base.max_output_events, events + 16),
        max_events=max(base.max_events, events * 2),
        max_lines=max(base.max_lines, events * 4),
        max_response_bytes=max(base.max_response_bytes, events * 512),
    )


def calibrate(duration_s: float = 6.0, base_url: str | None = None) -> Calibration:
    """Measure this process's ceiling against a local simulator (about ``duration_s``)."""
    from probes.engine import measure_sync  # the client loads when a calibration runs

    sim = None
    if base_url is None:
        sim = start_in_process()
        base_url = sim.base_url
    try:
        flood_events = int(max(20_000, 40_000 * duration_s / 2))
        limits = _limits(flood_events, duration_s)
        cpu0 = time.process_time()
        flood = measure_sync(
            ProbeRequest(
                api="openai-chat",
                base_url=base_url,
                model="calibrate@tps=0,ttft=0,k=1",
                max_tokens=flood_events,
                limits=limits,
            )
        )
        cpu = time.process_time() - cpu0
        span_ms = flood.timeline["t_us"] if flood.timeline else []
        out = (
            [t for t, c in zip(span_ms, flood.timeline["ch"], strict=False) if c == "a"]
            if flood.timeline
            else []
        )
        if flood.status != "ok" or len(out) < 2:
            raise RuntimeError(f"calibration flood run failed: {flood.status} {flood.error}")
        flood_rate = (len(out) - 1) / ((out[-1] - out[0]) / 1e6)
        safe = flood_rate * SAFE_FRACTION
        # Half the duration at the safe rate, never more events than the flood sent.
        paced_tokens = int(min(max(1000, safe * duration_s / 2), flood_events))
        paced_request = ProbeRequest(
            api="openai-chat",
            base_url=base_url,
            model=f"calibrate@tps={safe:.0f},ttft={PACED_TTFT_MS},k=1",
            max_tokens=paced_tokens,
            limits=limits,
        )
        tries, clean = 0, False
        while tries < VERIFY_TRIES and not clean:
            tries += 1
            paced = measure_sync(paced_request)
            true_tps, true_ttft = _true_rate(paced)
            clean = _clean(paced, true_tps, round(safe))
            if paced.status != "ok":
                break  # a failed run is reported as it is, not measured again
        tps_err = ttft_err = None
        if paced.status == "ok" and true_tps and paced.output_tps:
            tps_err = round((paced.output_tps / true_tps - 1) * 100, 3)
        if paced.ttft_ms is not None and true_ttft is not None:
            ttft_err = round(paced.ttft_ms - true_ttft, 3)
        return Calibration(
            flood_events_per_s=round(flood_rate, 1),
            cpu_us_per_event=round(cpu / len(out) * 1e6, 2),
            accurate_events_per_s=round(safe, 1),
            accurate_tok_s=round(safe, 1),
            verified_tps_error_pct=tps_err,
            verified_ttft_error_ms=ttft_err,
            verified_clean=clean,
            verified_tries=tries,
            duration_s=duration_s,
            python=sys.version.split()[0],
            machine=f"{platform.system()} {platform.machine()}",
        )
    finally:
        if sim is not None:
            sim.stop()
