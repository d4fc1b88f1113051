"""Prefill speed against the simulator's known prefill rate, with a real long-10k prompt.

The simulator (in its own process) holds the first token back for its base TTFT plus
the prompt's uncached tokens / its prefill rate, counting the prompt with o200k as we do.
With a base TTFT of 0 the only other time inside our TTFT is the local round trip and
the simulator reading a ~40 KB request (a few ms), so the measured rate must sit just
under the configured one; with a base TTFT the client-side rate is the lower bound the
definition says it is: tokens / (base + tokens / rate).
"""

from __future__ import annotations

import pytest

from probes import prompts
from probes.catalog import workload_suite
from probes.engine import ProbeRequest, measure_sync
from probes.kinds import requests as kind_requests
from probes.simulator import SimulatorProcess

RATE = 10_000  # prompt tokens/s: 10,000 tokens take 1 s, well above any local noise
# Our TTFT also holds the round trip and the simulator parsing and counting the prompt:
# up to ~50 ms on a loaded 2-core VM, 5 % of that 1 s. Wrong token counts (the whole
# prompt instead of its uncached part, the output's) or units are off by far more.
REL = 0.05


def long_prompt(seed: int) -> list[dict]:
    return prompts.build(kind_requests.prompt_spec(workload_suite.get("long-10k")), seed)


def measure_long(sim: SimulatorProcess, model: str, seed: int, **request) -> tuple:
    messages = long_prompt(seed)
    result = measure_sync(
        ProbeRequest(
            api=request.pop("api", "openai-chat"),
            base_url=sim.base_url,
            model=model,
            messages=messages,
            max_tokens=60,
            **request,
        )
    )
    assert result.status == "ok", result.error
    return result, prompts.input_size(messages)


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
def test_a_long_10k_run_measures_the_providers_prefill_rate(sim_process, api) -> None:
    result, size = measure_long(sim_process, f"sim@ttft=0,tps=2000,prefill={RATE}", 1, api=api)
    assert 9_000 <= size <= 11_000
    assert result.input_tokens == size and not result.cached_input_tokens
    assert RATE * (1 - REL) <= result.prefill_tps <= RATE * 1.001
    assert result.prefill_tps == pytest.approx(size / (result.ttft_ms / 1e3), rel=1e-3)


def test_the_client_side_rate_is_a_lower_bound_that_includes_the_time_to_first_token(
    sim_process,
) -> None:
    base_ms = 400
    result, size = measure_long(sim_process, f"sim@ttft={base_ms},tps=2000,prefill={RATE}", 2)
    expected = size / (base_ms / 1e3 + size / RATE)
    assert result.prefill_tps == pytest.approx(expected, rel=REL)
    assert result.prefill_tps < 0.8 * RATE


def test_without_usage_our_count_of_the_fresh_prompt_is_used(sim_process) -> None:
    model = f"sim@ttft=0,tps=2000,prefill={RATE},usage=none"
    messages = long_prompt(3)
    size = prompts.input_size(messages)
    result, _ = measure_long(sim_process, model, 3, prompt_tokens=size)
    assert result.input_tokens is None
    assert RATE * (1 - REL) <= result.prefill_tps <= RATE * 1.001
    # A repeat (no count given: its cached share is unknown) gets no figure.
    repeat, _ = measure_long(sim_process, model, 3)
    assert repeat.prefill_tps is None


def test_a_cached_repeat_and_a_short_prompt_have_no_prefill_rate(sim_process) -> None:
    model = f"sim@ttft=0,tps=2000,prefill={RATE}"
    cold, size = measure_long(sim_process, model, 4)
    warm, _ = measure_long(sim_process, model, 4)
    assert cold.prefill_tps is not None
    assert warm.cached_input_tokens == size and warm.prefill_tps is None
    assert warm.ttft_ms < cold.ttft_ms / 10  # nothing left to prefill

    spec = kind_requests.prompt_spec(workload_suite.get("chat-short"))
    short = measure_sync(
        ProbeRequest(
            api="openai-chat",
            base_url=sim_process.base_url,
            model=model,
            messages=prompts.build(spec, 5),
            max_tokens=60,
        )
    )
    assert short.ok and short.input_tokens < 1000 and short.prefill_tps is None


def test_the_providers_own_prompt_time_gives_its_own_rate(sim_process) -> None:
    # The simulator reports Cerebras-style time_info: prompt_time = its own TTFT.
    result, size = measure_long(sim_process, f"sim@ttft=0,tps=2000,prefill={RATE}", 6)
    assert result.server_prefill_ms is not None
    assert result.server_prefill_tps == pytest.approx(
        size / (result.server_prefill_ms / 1e3), rel=1e-3
    )
    # No network inside the provider's clock: at least our client-side rate. Within 0.1 %:
    # the simulator stamps its first send after its write returns, and its receipt is
    # the kernel's (simulator/arrival.py), so its own TTFT may outlast ours by the
    # write's microseconds.
    assert result.prefill_tps <= result.server_prefill_tps * 1.001
    assert result.server_prefill_tps <= RATE * 1.001
