"""Against the simulator's known schedule, TTFT and speed come out within tolerance.

The simulator runs in its own process and reports the true send time of its first and
last output event (same system-wide perf_counter clock), so the client is compared with
what was really sent. Tolerances suit a loaded 2-core VM, where waking an idle process
now and then takes a few ms (TTFT error: median 0.3 ms, tail to ~5 ms measured here);
10 ms still catches the real mistakes (role chunk taken as first token, cold connection,
batching). The tight targets are checked by tests/benchmarks/bench_engine.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from probes.engine import ProbeRequest, RunResult, measure, measure_sync
from probes.onboarding.calibration import calibrate
from probes.simulator import SimulatorProcess


def truth(result: RunResult) -> tuple[float, float]:
    """(true TTFT ms from our t0, true output tok/s) as the simulator sent them."""
    sim = result.usage["x_simulator"]
    span_s = (sim["t_last_ns"] - sim["t_first_ns"]) / 1e9
    tps = (sim["output_tokens"] - sim["first_event_tokens"]) / span_s
    return (sim["t_first_ns"] - result.t0_ns) / 1e6, tps


def server_ttft(result: RunResult) -> float:
    """Request fully received -> first output event sent, by the simulator's clock."""
    sim = result.usage["x_simulator"]
    return (sim["t_first_ns"] - sim["t_request_ns"]) / 1e6


def measured_fairly(request: ProbeRequest, on_schedule=lambda result: True) -> RunResult:
    """A run on which neither side went without a core, measured up to three times.

    On this 2-core machine the test processes, the simulator and the suite's other
    processes share two cores; a process that waits tens of ms for one moves a stamp
    by as much. Either side says so: our client flags a run whose loop was held
    (``client_bound``, probes/engine/loop_lag.py), and the simulator's own stamps show it
    missed its schedule (`on_schedule`). Such a run is measured again; a run that says
    neither must then be as accurate as the methodology promises, and three runs that
    all say one of them fail the test."""
    for _ in range(3):
        result = measure_sync(request)
        if result.status != "ok" or (not result.client_bound and on_schedule(result)):
            break
    assert result.status == "ok", result.error
    assert not result.client_bound, (result.loop_lag_first_ms, result.loop_lag_max_ms)
    assert on_schedule(result), result.usage["x_simulator"]
    return result


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
@pytest.mark.parametrize(
    ("tps", "k", "tokens"),
    [(100, 1, 60), (500, 1, 250), (2100, 1, 1000), (2100, 4, 1200), (4200, 8, 2400)],
)
def test_ttft_and_speed_match_the_schedule(
    sim_process: SimulatorProcess, api: str, tps: int, k: int, tokens: int
) -> None:
    def kept_its_schedule(result: RunResult) -> bool:
        # Give or take a late wake-up on a busy VM.
        return 60 <= server_ttft(result) <= 75 and truth(result)[1] == pytest.approx(tps, rel=0.02)

    request = ProbeRequest(
        api=api,
        base_url=sim_process.base_url,
        model=f"sim@tps={tps},ttft=60,k={k}",
        max_tokens=tokens,
    )
    # The simulator kept its schedule...
    result = measured_fairly(request, kept_its_schedule)
    true_ttft, true_tps = truth(result)
    # ...and we measured what it really sent.
    assert result.ttft_ms == pytest.approx(true_ttft, abs=10.0)
    assert result.ttfat_ms == result.ttft_ms
    assert result.output_tps == pytest.approx(true_tps, rel=0.03)
    assert result.output_tokens == result.output_tokens_o200k == tokens
    assert result.token_source == "usage"
    assert result.output_events == tokens // k
    assert result.tokens_per_event == k
    assert result.tpot_ms == pytest.approx(1000 / tps, rel=0.03)
    assert result.e2e_tps == pytest.approx(tokens / (result.e2e_ms / 1000), rel=1e-3)
    assert result.short_output is (tokens < 50)
    assert result.ttfb_ms < result.ttft_ms <= result.e2e_ms
    assert result.cold_connection is False and result.connect_ms is not None
    assert result.itl_ms_p50 <= result.itl_ms_p95 <= result.itl_ms_p99 <= result.itl_ms_max


def test_jittered_speed_averages_out(sim_process: SimulatorProcess) -> None:
    result = measured_fairly(
        ProbeRequest(
            api="openai-chat",
            base_url=sim_process.base_url,
            model="sim@tps=400,ttft=40,jitter=40",
            max_tokens=400,
        ),
        lambda result: truth(result)[1] == pytest.approx(400, rel=0.05),
    )
    _, true_tps = truth(result)
    assert result.output_tps == pytest.approx(true_tps, rel=0.03)
    assert result.itl_ms_max > 1000 / 400  # the gaps really vary


def test_reasoning_counts_for_ttft_but_not_for_ttfat(sim_process: SimulatorProcess) -> None:
    result = measured_fairly(
        ProbeRequest(
            api="openai-chat",
            base_url=sim_process.base_url,
            model="sim@tps=1000,ttft=50,reasoning=100",
            max_tokens=300,
            include_text=True,
        )
    )
    true_ttft, _ = truth(result)
    assert result.ttft_ms == pytest.approx(true_ttft, abs=10.0)
    # The answer starts after 100 reasoning tokens at 1 ms each.
    assert result.ttfat_ms - result.ttft_ms == pytest.approx(100, abs=6)
    assert result.reasoning_tokens == 100
    assert result.output_tokens == result.output_tokens_o200k == 300
    assert result.timeline["ch"].count("r") == 100 and result.timeline["ch"].count("a") == 200
    assert len(result.reasoning_text.split()) == 100


def test_concurrent_streams_in_one_process_each_keep_their_speed(
    sim_process: SimulatorProcess,
) -> None:
    async def many() -> list[RunResult]:
        reqs = [
            ProbeRequest(
                api="openai-chat",
                base_url=sim_process.base_url,
                model=f"sim@tps=1000,ttft=30,seed={i}",
                max_tokens=500,
            )
            for i in range(6)
        ]
        return await asyncio.gather(*(measure(r) for r in reqs))

    results = asyncio.run(many())
    for result in results:
        assert result.status == "ok"
        _, true_tps = truth(result)
        assert result.output_tps == pytest.approx(true_tps, rel=0.03)


def test_timeline_is_compact_and_consistent(sim_process: SimulatorProcess) -> None:
    result = measure_sync(
        ProbeRequest(
            api="openai-chat",
            base_url=sim_process.base_url,
            model="sim@tps=2000,ttft=20,k=2",
            max_tokens=100,
        )
    )
    tl = result.timeline
    assert set(tl) == {"t_us", "ch", "tok"}
    # Output events only: the role chunk, usage chunk and [DONE] are counted, not kept.
    assert tl["ch"] == "a" * 50 and sum(tl["tok"]) == 100
    assert result.stream["sse_events"] > 50 and result.stream["completion_marker_seen"]
    assert tl["t_us"] == sorted(tl["t_us"])
    first = tl["ch"].index("a")
    assert tl["t_us"][first] / 1000 == pytest.approx(result.ttft_ms, abs=0.01)


def test_calibration_reports_this_machines_ceiling(sim_process: SimulatorProcess) -> None:
    # The duration the workers' scheduled calibration uses (its flood of 120,000 events
    # once failed on the provider limit of 100,000 output events; so did a fast
    # machine's paced run at 1 s).
    report = calibrate(base_url=sim_process.base_url).to_dict()
    json.dumps(report)  # JSON-able, for storage next to the results it qualifies
    assert report["flood_events_per_s"] > 10_000, report
    assert report["accurate_events_per_s"] == pytest.approx(
        report["flood_events_per_s"] * 0.45, rel=1e-3
    )
    assert report["verified_tps_error_pct"] is not None, report
    # Measured again while either side went without a core; the run kept must be
    # clean, and then as accurate as the methodology promises.
    assert report["verified_clean"] is True, report
    assert 1 <= report["verified_tries"] <= 3
    assert abs(report["verified_tps_error_pct"]) < 3
