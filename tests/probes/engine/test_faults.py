"""Every fault mode of the simulator yields the right status and keeps what was measured
before the fault."""

from __future__ import annotations

import socket

import pytest

from probes.engine import STATUSES, Limits, ProbeRequest, RunResult, measure_sync
from probes.simulator import SimulatorHandle, SimulatorProcess

FAST = Limits(connect_s=2, first_token_s=2, stall_s=0.3, total_s=5)


def run(
    sim: SimulatorHandle | SimulatorProcess,
    model: str,
    *,
    api: str = "openai-chat",
    max_tokens: int = 40,
    limits: Limits = FAST,
) -> RunResult:
    result = measure_sync(
        ProbeRequest(
            api=api, base_url=sim.base_url, model=model, max_tokens=max_tokens, limits=limits
        )
    )
    assert result.status in STATUSES
    return result


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
@pytest.mark.parametrize(
    ("fault", "status", "http"),
    [
        ("auth", "auth_error", 401),
        ("not_found", "not_found", 404),
        ("rate_limit", "rate_limited", 429),
        ("server_error", "server_error", 500),
    ],
)
def test_http_errors_map_to_their_status(
    sim: SimulatorHandle, api: str, fault: str, status: str, http: int
) -> None:
    result = run(sim, f"m@fault={fault}", api=api)
    assert (result.status, result.http_status) == (status, http)
    assert "simulated" in result.error
    assert result.ttfb_ms is not None and result.ttft_ms is None
    assert result.output_tokens is None and result.output_tps is None
    if fault == "rate_limit":
        assert result.retry_after_s == 7.0
        assert result.rate_limit == {
            "limit_requests": 100,
            "remaining_requests": 0,
            "reset_requests_seconds": 7.0,
        }


def test_an_html_page_with_status_200_is_a_protocol_error(sim: SimulatorHandle) -> None:
    result = run(sim, "m@fault=html_200")
    assert (result.status, result.http_status) == ("protocol_error", 200)
    assert "text/html" in result.error
    assert result.ttft_ms is None


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
@pytest.mark.parametrize(
    ("fault", "status"),
    [
        ("stall", "timeout_stall"),
        ("disconnect", "truncated"),
        ("truncate", "truncated"),
        ("malformed_json", "protocol_error"),
        ("error_event", "stream_error"),
        ("huge_event", "protocol_error"),
        ("invalid_utf8", "protocol_error"),
    ],
)
def test_mid_stream_faults_keep_what_was_measured_before(
    sim_process: SimulatorProcess, api: str, fault: str, status: str
) -> None:
    # Timings are asserted: the simulator runs in its own process (in a thread of ours it
    # waited for our GIL on a busy machine, and a TTFT of 318 ms came out of 20).
    result = run(sim_process, f"m@tps=100,ttft=20,fault={fault},after=8", api=api)
    assert result.status == status, result.error
    assert result.http_status == 200
    assert result.error
    # The eight events sent before the fault were measured.
    assert result.output_events == 8
    assert result.output_tokens == 8 and result.token_source == "o200k"
    assert 15 <= result.ttft_ms <= 200
    assert result.output_tps == pytest.approx(100, rel=0.3)
    assert result.e2e_ms >= result.ttft_ms
    if fault == "error_event":
        assert "simulated failure" in result.error
        assert result.error_detail is not None
    if fault == "stall":
        assert result.e2e_ms - result.ttft_ms >= 300  # gave up after the stall limit


def test_a_reset_connection_is_a_network_error(sim: SimulatorHandle) -> None:
    result = run(sim, "m@tps=400,ttft=20,fault=reset,after=8")
    assert result.status == "network_error"
    # A reset may discard bytes still in flight; whatever arrived is kept.
    assert result.output_events <= 8


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
def test_a_stream_without_its_marker_but_with_a_finish_reason_is_ok(
    sim: SimulatorHandle, api: str
) -> None:
    result = run(sim, "m@tps=1000,ttft=10,fault=no_done", api=api)
    assert result.status == "ok"
    assert result.stream["completion_marker_seen"] is False
    assert result.output_tokens == 40


def test_a_slow_first_token_times_out_with_ttfb_but_no_ttft(sim: SimulatorHandle) -> None:
    limits = Limits(first_token_s=0.3, stall_s=5, total_s=5)
    result = run(sim, "m@fault=slow_first_token", limits=limits)
    assert result.status == "timeout_first_token"
    assert result.ttfb_ms is not None and result.ttft_ms is None
    assert 300 <= result.e2e_ms < 1500


def test_an_endless_stream_hits_the_total_limit(sim_process: SimulatorProcess) -> None:
    limits = Limits(first_token_s=2, stall_s=2, total_s=0.5)
    result = run(sim_process, "m@tps=500,ttft=10,fault=endless", limits=limits)
    assert result.status == "timeout_total"
    assert 500 <= result.e2e_ms < 1500
    assert result.output_events > 50
    assert result.output_tps == pytest.approx(500, rel=0.2)


def test_a_response_larger_than_the_limit_is_cut(sim: SimulatorHandle) -> None:
    limits = Limits(max_response_bytes=20_000, total_s=5)
    result = run(sim, "m@tps=0,ttft=0", max_tokens=5000, limits=limits)
    assert result.status == "protocol_error"
    assert "larger than 20000 bytes" in result.error
    assert 0 < result.output_events < 5000


def test_a_completed_stream_without_output_is_empty(sim: SimulatorHandle) -> None:
    result = run(sim, "m@tokens=0,ttft=5")
    assert result.status == "empty"
    assert result.ttft_ms is None and result.output_events == 0
    assert result.output_tokens == 0  # reported by usage: measured, not unmeasured


def test_a_refused_connection_is_a_network_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again at once: nothing listens there
    result = measure_sync(
        ProbeRequest(
            api="openai-chat", base_url=f"http://127.0.0.1:{port}/v1", model="m", limits=FAST
        )
    )
    assert result.status == "network_error"
    assert result.http_status is None and result.ttfb_ms is None and result.ttft_ms is None
    assert result.output_tokens is None and result.output_events is None


def test_a_connection_that_never_completes_is_timeout_connect() -> None:
    # A listener whose accept queue is full drops further SYNs: connect() hangs.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            fillers.append(c)
        limits = Limits(connect_s=0.3, first_token_s=5, total_s=5)
        result = measure_sync(
            ProbeRequest(
                api="openai-chat",
                warm=False,
                model="m",
                base_url=f"http://127.0.0.1:{port}/v1",
                limits=limits,
            )
        )
    finally:
        for c in fillers:
            c.close()
        server.close()
    assert result.status == "timeout_connect"
    assert result.cold_connection is True
    assert result.ttfb_ms is None


def test_a_stall_is_caught_at_the_stall_limit_even_when_the_first_token_limit_is_longer(
    sim: SimulatorHandle,
) -> None:
    limits = Limits(first_token_s=3, stall_s=0.2, total_s=5)
    result = run(sim, "m@tps=100,ttft=20,fault=stall,after=8", limits=limits)
    assert result.status == "timeout_stall"
    stalled_for_ms = result.e2e_ms - result.ttft_ms
    # Eight events at 100 tok/s take ~70 ms, then 200 ms of silence: not the 3 s
    # first-token limit.
    assert 200 <= stalled_for_ms < 1000, stalled_for_ms
