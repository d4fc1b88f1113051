"""What the simulated server tells about itself: /metrics as vLLM or llama.cpp publish it,
a DCGM exporter's energy counter, and background load on demand.

Every figure follows the streams the server actually served: a stream's queue, prefill
and decode times are the ones it reports in ``x_simulator`` (request received → first
event sent → last event sent), so a client's /metrics deltas can be checked to the
microsecond. Energy follows a known model, idle watts + joules per output token (W per
token/s): GPU 0 draws it, GPU 1 only idles, so a selector matters.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from time import perf_counter
from typing import Any

# vLLM's own request-time buckets (seconds), shortened.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SLOTS = 8  # the KV cache holds this many requests: its use is running / SLOTS
MODEL_LABEL = 'model_name="simulated"'


@dataclass(frozen=True)
class PowerModel:
    idle_w: float = 60.0  # per GPU
    j_per_token: float = 0.5  # the W per token/s of GPU 0

    def joules(self, seconds: float, tokens: int) -> float:
        return self.idle_w * seconds + self.j_per_token * tokens


class _Histogram:
    def __init__(self) -> None:
        self.counts = [0] * len(_BUCKETS)
        self.sum = 0.0
        self.count = 0

    def observe(self, seconds: float) -> None:
        self.sum += seconds
        self.count += 1
        for i, le in enumerate(_BUCKETS):
            if seconds <= le:
                self.counts[i] += 1

    def lines(self, name: str) -> list[str]:
        out = [f"# TYPE {name} histogram"]
        out += [
            f'{name}_bucket{{{MODEL_LABEL},le="{le}"}} {n}'
            for le, n in zip(_BUCKETS, self.counts, strict=True)
        ]
        out.append(f'{name}_bucket{{{MODEL_LABEL},le="+Inf"}} {self.count}')
        out += [
            f"{name}_sum{{{MODEL_LABEL}}} {self.sum!r}",
            f"{name}_count{{{MODEL_LABEL}}} {self.count}",
        ]
        return out


class ServerStats:
    """The server's counters, gauges and histograms, and its energy counter."""

    def __init__(self, engine: str | None, power: PowerModel | None) -> None:
        self.engine = engine
        self.power = power
        self.t0 = perf_counter()
        self.active: set[int] = set()  # ids of streams in flight
        self.queue, self.prefill, self.decode, self.e2e = (_Histogram() for _ in range(4))
        self.prompt_tokens = self.cached_tokens = self.output_tokens = 0
        self.prompt_s = self.decode_s = 0.0
        self.background = 0  # requests running for the background load
        self.energy_tokens = 0  # output tokens GPU 0 has generated, background included
        # The counter starts where a GPU up for a day would be (60 W idle): a reset to zero
        # then shows as the counter going down, as it does on a real exporter.
        self.energy_zero_j = -5_000_000.0

    # -- the streams --------------------------------------------------------------------

    def started(self, key: int) -> None:
        self.active.add(key)

    def ended(self, key: int) -> None:
        self.active.discard(key)

    def finished(self, key: int, queue_s: float, prefill_s: float, decode_s: float,
                 prompt: int, cached: int, output: int) -> None:  # fmt: skip
        self.active.discard(key)
        self.queue.observe(queue_s)
        self.prefill.observe(prefill_s)
        self.decode.observe(decode_s)
        self.e2e.observe(queue_s + prefill_s + decode_s)
        self.prompt_tokens += prompt
        self.cached_tokens += cached
        self.output_tokens += output
        self.prompt_s += prefill_s
        self.decode_s += decode_s
        self.energy_tokens += output

    # -- background load ----------------------------------------------------------------

    def load(self, loop: asyncio.AbstractEventLoop, running: int, per_s: float, seconds: float):
        """For ``seconds``: ``running`` more requests in flight, finishing ``per_s`` a second
        (each 20 ms queued, 30 ms of prefill, 200 ms and 100 tokens of decode)."""
        self.background += running
        end = perf_counter() + seconds
        period = 1.0 / per_s if per_s > 0 else None

        def tick() -> None:
            if perf_counter() >= end:
                self.background -= running
                return
            if period is not None:
                self.finished(-1, 0.02, 0.03, 0.2, 200, 0, 100)
                loop.call_later(period, tick)

        if period is None:
            loop.call_later(seconds, tick)
        else:
            loop.call_later(period, tick)

    # -- what it publishes --------------------------------------------------------------

    @property
    def running(self) -> int:
        return len(self.active) + self.background

    def metrics(self) -> str:
        running = self.running
        kv = min(1.0, running / SLOTS)
        if self.engine == "llama.cpp":
            lines = [
                "# TYPE llamacpp:prompt_tokens_total counter",
                f"llamacpp:prompt_tokens_total {self.prompt_tokens - self.cached_tokens}",
                "# TYPE llamacpp:prompt_seconds_total counter",
                f"llamacpp:prompt_seconds_total {self.prompt_s!r}",
                "# TYPE llamacpp:tokens_predicted_total counter",
                f"llamacpp:tokens_predicted_total {self.output_tokens}",
                "# TYPE llamacpp:tokens_predicted_seconds_total counter",
                f"llamacpp:tokens_predicted_seconds_total {self.decode_s!r}",
                "# TYPE llamacpp:requests_processing gauge",
                f"llamacpp:requests_processing {running}",
                "# TYPE llamacpp:requests_deferred gauge",
                "llamacpp:requests_deferred 0",
                "# TYPE llamacpp:kv_cache_usage_ratio gauge",
                f"llamacpp:kv_cache_usage_ratio {kv}",
            ]
            return "\n".join(lines) + "\n"
        lines = [
            "# TYPE vllm:num_requests_running gauge",
            f"vllm:num_requests_running{{{MODEL_LABEL}}} {float(running)}",
            "# TYPE vllm:num_requests_waiting gauge",
            f"vllm:num_requests_waiting{{{MODEL_LABEL}}} {float(max(0, running - SLOTS))}",
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f"vllm:kv_cache_usage_perc{{{MODEL_LABEL}}} {kv}",
            "# TYPE vllm:prefix_cache_queries counter",
            f"vllm:prefix_cache_queries_total{{{MODEL_LABEL}}} {float(self.prompt_tokens)}",
            "# TYPE vllm:prefix_cache_hits counter",
            f"vllm:prefix_cache_hits_total{{{MODEL_LABEL}}} {float(self.cached_tokens)}",
            *self.queue.lines("vllm:request_queue_time_seconds"),
            *self.prefill.lines("vllm:request_prefill_time_seconds"),
            *self.decode.lines("vllm:request_decode_time_seconds"),
            *self.e2e.lines("vllm:e2e_request_latency_seconds"),
        ]
        return "\n".join(lines) + "\n"

    def energy_mj(self) -> tuple[float, float]:
        """GPU 0's and GPU 1's energy counters now, in mJ."""
        assert self.power is not None
        seconds = perf_counter() - self.t0
        gpu0 = self.power.joules(seconds, self.energy_tokens) - self.energy_zero_j
        return gpu0 * 1e3, self.power.idle_w * seconds * 1e3

    def reset_energy(self) -> None:
        """A restarted exporter: GPU 0's counter starts again from zero."""
        assert self.power is not None
        self.energy_zero_j = self.power.joules(perf_counter() - self.t0, self.energy_tokens)

    def dcgm(self) -> str:
        gpu0, gpu1 = self.energy_mj()
        name = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"
        labels = 'UUID="GPU-sim-{0}",device="nvidia{0}",gpu="{0}",modelName="Simulated GPU"'
        return (
            f"# HELP {name} Total energy consumption since boot (in mJ).\n"
            f"# TYPE {name} counter\n"
            f"{name}{{{labels.format(0)}}} {gpu0:.0f}\n"
            f"{name}{{{labels.format(1)}}} {gpu1:.0f}\n"
        )


def load_request(body: Any) -> tuple[int, float, float]:
    """``{"running": N, "per_s": R, "seconds": S}`` of POST /simulator/load."""
    running = int(body.get("running", 4))
    per_s = float(body.get("per_s", 20))
    seconds = float(body.get("seconds", 5))
    if not (0 <= running <= 1000 and 0 <= per_s <= 1000 and 0 < seconds <= 3600):
        raise ValueError("running 0..1000, per_s 0..1000, seconds 0..3600")
    return running, per_s, seconds
