"""Benchmark: this engine vs the official openai SDK vs a plain httpx aiter_lines loop.

    python tests/benchmarks/bench_engine.py [--quick] [--runs N]

All three clients run in this process, side by side, against the simulated provider in a
child process (so it does not steal our CPU). The simulator reports the true send time of
its first and last output event on the same system-wide perf_counter clock, so errors
are against what was really sent, not against the plan. Not a pytest test: it prints
ratios against baselines measured in the same run and never asserts timings.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402
import openai  # noqa: E402

from probes.engine import ProbeRequest, measure  # noqa: E402
from probes.simulator import start_in_process  # noqa: E402

MESSAGES = [{"role": "user", "content": "Count to infinity."}]


@dataclass
class Sample:
    """One stream as a client saw it, next to what the simulator really sent."""

    ttft_ms: float | None
    tps: float | None
    events: int
    cpu_s: float
    true_ttft_ms: float
    true_tps: float
    first_t: int = 0
    last_t: int = 0

    @property
    def ttft_err_ms(self) -> float | None:
        return None if self.ttft_ms is None else self.ttft_ms - self.true_ttft_ms

    @property
    def tps_err_pct(self) -> float | None:
        return None if self.tps is None else (self.tps / self.true_tps - 1) * 100


def _truth(sim: dict, t0: int) -> tuple[float, float]:
    span = (sim["t_last_ns"] - sim["t_first_ns"]) / 1e9
    tps = (sim["output_tokens"] - sim["first_event_tokens"]) / span if span > 0 else float("nan")
    return (sim["t_first_ns"] - t0) / 1e6, tps


def _rate(times: list[int], tokens: int, k: int) -> float | None:
    if len(times) < 2 or times[-1] == times[0]:
        return None
    return (tokens - k) / ((times[-1] - times[0]) / 1e9)


# -- the three clients -----------------------------------------------------------------


async def engine_client(base_url: str, model: str, n: int, k: int) -> Sample:
    r = await measure(
        ProbeRequest(
            api="openai-chat", base_url=base_url, model=model, messages=MESSAGES, max_tokens=n
        )
    )
    assert r.status == "ok", (r.status, r.error)
    cpu = r.stream["client_cpu_ms"] / 1e3  # t0 -> end of stream, like the other clients
    true_ttft, true_tps = _truth(r.usage["x_simulator"], r.t0_ns)
    tl = r.timeline
    out = [t for t, c in zip(tl["t_us"], tl["ch"], strict=True) if c == "a"]
    return Sample(
        r.ttft_ms, r.output_tps, r.output_events, cpu, true_ttft, true_tps, out[0], out[-1]
    )


async def sdk_client(base_url: str, model: str, n: int, k: int) -> Sample:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0)
    await client.models.list()  # warm the connection and the code path
    cpu0 = time.process_time()
    times: list[int] = []
    sim = None
    t0 = perf_counter_ns()
    stream = await client.chat.completions.create(
        model=model,
        messages=MESSAGES,
        max_tokens=n,
        stream=True,
        stream_options={"include_usage": True},
    )
    async for chunk in stream:
        t = perf_counter_ns()
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(t)
        if chunk.usage is not None:
            sim = chunk.usage.model_dump()["x_simulator"]
    cpu = time.process_time() - cpu0
    await client.close()
    true_ttft, true_tps = _truth(sim, t0)
    return Sample(
        (times[0] - t0) / 1e6,
        _rate(times, n, k),
        len(times),
        cpu,
        true_ttft,
        true_tps,
        times[0],
        times[-1],
    )


async def httpx_lines_client(base_url: str, model: str, n: int, k: int) -> Sample:
    async with httpx.AsyncClient(timeout=60) as client:
        await client.get(base_url + "/models")
        cpu0 = time.process_time()
        times: list[int] = []
        sim = None
        body = {
            "model": model,
            "messages": MESSAGES,
            "max_tokens": n,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        t0 = perf_counter_ns()
        async with client.stream("POST", base_url + "/chat/completions", json=body) as resp:
            async for line in resp.aiter_lines():
                t = perf_counter_ns()
                if not line.startswith("data: "):
                    continue
                payload = line[6:]
                if payload == "[DONE]":
                    break
                obj = json.loads(payload)
                choices = obj.get("choices")
                if choices and choices[0]["delta"].get("content"):
                    times.append(t)
                if obj.get("usage"):
                    sim = obj["usage"]["x_simulator"]
        cpu = time.process_time() - cpu0
    true_ttft, true_tps = _truth(sim, t0)
    return Sample(
        (times[0] - t0) / 1e6,
        _rate(times, n, k),
        len(times),
        cpu,
        true_ttft,
        true_tps,
        times[0],
        times[-1],
    )


CLIENTS: dict[str, Callable[[str, str, int, int], Awaitable[Sample]]] = {
    "engine": engine_client,
    "openai-sdk": sdk_client,
    "httpx-lines": httpx_lines_client,
}


# -- scenarios ---------------------------------------------------------------------------


def _between_runs() -> None:
    gc.collect()


def _fmt(values: list[float], digits: int = 2) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):+.{digits}f} (max {max(values, key=abs):+.{digits}f})"


async def paced(base_url: str, runs: int, seconds: float) -> list[tuple]:
    rows = []
    print(f"\n== Paced streams: {runs} runs each, ~{seconds:.2f} s of output per run")
    header = (
        f"{'client':<12} {'tok/s':>6} {'k':>2}  {'TTFT err ms: median (max)':<28}"
        f"{'tok/s err %: median (max)':<28}{'CPU us/event':>12}"
    )
    print(header)
    for tps in (100, 2100, 4200, 10000, 50000):
        for k in (1, 8):
            n = max(50, int(tps * seconds) // k * k)
            for name, client in CLIENTS.items():
                samples = []
                for i in range(runs):
                    _between_runs()
                    model = f"bench@tps={tps},ttft=80,k={k},seed={i}"
                    samples.append(await client(base_url, model, n, k))
                ttft = [s.ttft_err_ms for s in samples if s.ttft_err_ms is not None]
                tps_err = [s.tps_err_pct for s in samples if s.tps_err_pct is not None]
                cpu = statistics.median(s.cpu_s / max(1, s.events) * 1e6 for s in samples)
                rows.append((name, tps, k, ttft, tps_err, cpu))
                print(
                    f"{name:<12} {tps:>6} {k:>2}  {_fmt(ttft):<28}{_fmt(tps_err, 3):<28}"
                    f"{cpu:>12.1f}"
                )
    return rows


async def flood(base_url: str, events: int) -> dict[str, float]:
    print(f"\n== Ingest ceiling: {events} one-token events sent as fast as the socket takes")
    rates = {}
    for name, client in CLIENTS.items():
        _between_runs()
        n = events if name == "engine" else events // 4
        s = await client(base_url, "bench@tps=0,ttft=0,k=1", n, 1)
        rate = (s.events - 1) / ((s.last_t - s.first_t) / (1e6 if name == "engine" else 1e9))
        rates[name] = rate
        print(
            f"{name:<12} {rate:>10,.0f} events/s   {s.cpu_s / s.events * 1e6:6.1f} us CPU/event"
            f" (t0 to end of stream)"
        )
    print(
        f"engine / openai-sdk: {rates['engine'] / rates['openai-sdk']:.1f}x   "
        f"engine / httpx-lines: {rates['engine'] / rates['httpx-lines']:.1f}x"
    )
    return rates


async def concurrent(base_url: str, streams: int, tps: int, seconds: float) -> dict[str, float]:
    print(f"\n== {streams} concurrent streams at {tps} tok/s (1 token/event), one process")
    shares = {}
    for name, client in CLIENTS.items():
        _between_runs()
        n = int(tps * seconds)
        samples = await asyncio.gather(
            *(
                client(base_url, f"bench@tps={tps},ttft=80,k=1,seed={i}", n, 1)
                for i in range(streams)
            )
        )
        errs = [abs(s.tps_err_pct) for s in samples if s.tps_err_pct is not None]
        within = sum(e <= 2.0 for e in errs) / streams * 100
        shares[name] = within
        print(
            f"{name:<12} within 2 %: {within:5.1f} %   median |err| "
            f"{statistics.median(errs):.3f} %   worst {max(errs):.3f} %"
        )
    return shares


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter runs")
    parser.add_argument("--runs", type=int, default=None)
    args = parser.parse_args()
    runs = args.runs or (2 if args.quick else 5)
    seconds = 0.3 if args.quick else 0.6
    with start_in_process() as sim:
        print(
            f"Python {sys.version.split()[0]}, openai {openai.__version__}, "
            f"httpx {httpx.__version__}; simulator pid {sim.process.pid} at {sim.base_url}"
        )
        rows = await paced(sim.base_url, runs, seconds)
        rates = await flood(sim.base_url, 20_000 if args.quick else 60_000)
        shares = await concurrent(sim.base_url, 16, 2100, 0.5 if args.quick else 1.0)

    print("\n== Targets for the engine")
    at4200 = [r for r in rows if r[0] == "engine" and r[1] == 4200 and r[2] == 1][0]
    checks = [
        (
            "|tok/s error| <= 0.5 % at 4,200 tok/s (median)",
            abs(statistics.median(at4200[4])) <= 0.5,
        ),
        ("|TTFT error| <= 2 ms at 4,200 tok/s (median)", abs(statistics.median(at4200[3])) <= 2),
        ("ingest >= 40,000 events/s", rates["engine"] >= 40_000),
        ("ingest >= 8x the openai SDK", rates["engine"] >= 8 * rates["openai-sdk"]),
        ("16 x 2,100 tok/s: 95 % within 2 %", shares["engine"] >= 95),
    ]
    for label, ok in checks:
        print(f"  [{'PASS' if ok else 'MISS'}] {label}")


if __name__ == "__main__":
    asyncio.run(main())
