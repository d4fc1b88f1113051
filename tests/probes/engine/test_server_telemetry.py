"""A self-hosted server's side of each run: /metrics deltas, load, energy (real HTTP to the
simulator playing vLLM, llama.cpp and a DCGM exporter)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from probes.engine import ProbeRequest, measure_sync, servermetrics
from probes.engine import energy as energy_mod
from probes.engine.telemetry import Telemetry
from probes.simulator import PowerModel, Profile, ServerTraits, start_in_thread

POWER = PowerModel(idle_w=60.0, j_per_token=0.5)


def _root(sim) -> str:
    return sim.base_url.removesuffix("/v1")


def _run(sim, tel: Telemetry, tokens: int = 100, **body) -> object:
    req = ProbeRequest(
        api="openai-chat",
        base_url=sim.base_url,
        model="sim-default",
        max_tokens=tokens,
        telemetry=tel,
        extra_body=body,
    )
    return measure_sync(req)


def test_vllm_metrics_give_the_simulators_own_schedule_in_an_exact_window():
    traits = ServerTraits(metrics="vllm")
    with start_in_thread(Profile(tps=1000, ttft_ms=40), traits=traits) as sim:
        tel = Telemetry(server_metrics_url=_root(sim) + "/metrics")
        for _ in range(3):
            result = _run(sim, tel)
            truth = result.usage["x_simulator"]
            prefill = (truth["t_first_ns"] - truth["t_request_ns"]) / 1e6
            decode = (truth["t_last_ns"] - truth["t_first_ns"]) / 1e6
            assert result.status == "ok"
            assert result.server_window == "exact"
            assert result.server_queue_ms == pytest.approx(0.0, abs=2)
            assert result.server_prefill_ms == pytest.approx(prefill, abs=2)
            assert result.server_decode_ms == pytest.approx(decode, abs=2)
            total = result.server_queue_ms + result.server_prefill_ms + result.server_decode_ms
            assert total == pytest.approx(prefill + decode, abs=2)
            # The client waited for the server's time and the network: never less.
            assert result.e2e_ms >= total
            assert result.server_running_requests == 0
            assert result.network_rtt_ms is not None and result.network_rtt_ms >= 0


def test_a_run_during_background_load_is_shared_and_shows_the_load():
    with start_in_thread(Profile(tps=1000, ttft_ms=20), traits=ServerTraits(metrics="vllm")) as sim:
        root = _root(sim)
        load = {"running": 5, "per_s": 50, "seconds": 3}
        assert httpx.post(root + "/simulator/load", json=load).status_code == 200
        result = _run(sim, Telemetry(server_metrics_url=root + "/metrics"))
        assert result.status == "ok"
        assert result.server_window == "shared"
        assert result.server_running_requests >= 5
        assert result.server_kv_cache_pct > 50
        assert result.server_timing["metrics"]["finished"] > 1


def test_per_request_figures_from_the_response_win_over_the_window():
    with start_in_thread(Profile(tps=1000, ttft_ms=30), traits=ServerTraits(metrics="vllm")) as sim:
        root = _root(sim)
        httpx.post(root + "/simulator/load", json={"running": 2, "per_s": 50, "seconds": 2})
        tel = Telemetry(server_metrics_url=root + "/metrics")
        result = _run(sim, tel, return_request_metrics=True)
        truth = result.usage["x_simulator"]
        assert result.server_window == "per-request"
        prefill = (truth["t_first_ns"] - truth["t_request_ns"]) / 1e6
        assert result.server_prefill_ms == pytest.approx(prefill, abs=0.01)
        assert result.server_running_requests >= 2  # the load is still read


def test_llama_cpp_counters_give_prefill_and_decode_and_say_what_they_lack():
    traits = ServerTraits(metrics="llama.cpp")
    with start_in_thread(Profile(tps=1000, ttft_ms=30), traits=traits) as sim:
        result = _run(sim, Telemetry(server_metrics_url=_root(sim) + "/metrics"))
        truth = result.usage["x_simulator"]
        assert result.server_window == "exact"
        prefill = (truth["t_first_ns"] - truth["t_request_ns"]) / 1e6
        assert result.server_prefill_ms == pytest.approx(prefill, abs=2)
        assert result.server_queue_ms is None
        lacks = result.server_timing["metrics"]["lacks"]
        assert any(line.startswith("queue time") for line in lacks)


def test_a_server_without_metrics_or_with_unknown_names_is_measured_as_before():
    with start_in_thread(Profile(tps=1000, ttft_ms=20)) as sim:  # GET /metrics: 405
        plain = _run(sim, Telemetry())
        result = _run(sim, Telemetry(server_metrics_url=_root(sim) + "/metrics"))
        assert result.status == plain.status == "ok"
        assert result.output_tokens == plain.output_tokens
        assert result.server_window is None
        # The response's own timing (this simulator sends Cerebras' time_info) as before.
        assert (result.server_queue_ms, result.server_running_requests) == (0.0, None)
        assert "405" in result.server_timing["metrics"]["errors"][0]
        unreachable = Telemetry(server_metrics_url="http://127.0.0.1:9/metrics", deadline_s=1)
        assert _run(sim, unreachable).status == "ok"
    unknown = servermetrics.parse("# TYPE my_requests counter\nmy_requests_total 3\n")
    assert servermetrics.detect(unknown) is None
    assert "no /metrics with names" in servermetrics.lacks(None)[0]
    with pytest.raises(servermetrics.MetricsError):
        servermetrics.parse("<html>not metrics {</html>")


def test_tokens_per_joule_follow_the_simulated_dcgm_model_over_20_runs():
    traits = ServerTraits(metrics="vllm", power=POWER)
    with start_in_thread(Profile(tps=4000, ttft_ms=10), traits=traits) as sim:
        root = _root(sim)
        previous = None
        above_idle, totals = [], []
        for _ in range(21):
            tel = Telemetry(
                server_metrics_url=root + "/metrics",
                power_url=root + "/dcgm/metrics",
                power_selector="gpu=0",
                previous_energy=previous,
            )
            result = _run(sim, tel, tokens=200)
            note = result.server_timing["metrics"]["energy"]
            previous = (note["after_j"], note["at_s"])
            time.sleep(0.6)  # between runs: the idle the next run subtracts
            assert result.energy_window == "exact"
            model_j = POWER.joules(note["window_s"], result.output_tokens)
            totals.append(result.output_tokens_per_j / (result.output_tokens / model_j))
            if result.output_tokens_per_j_above_idle is not None:
                above_idle.append(result.output_tokens_per_j_above_idle * POWER.j_per_token)
        assert len(above_idle) == 20
        # Each run within 10 % (the reads' own timing on a loaded machine), 20 within 2 %.
        assert all(r == pytest.approx(1.0, rel=0.10) for r in totals), totals
        assert sum(totals) / len(totals) == pytest.approx(1.0, rel=0.02), totals
        assert sum(above_idle) / 20 == pytest.approx(1.0, rel=0.02), above_idle
        assert result.energy_j_per_token == pytest.approx(1 / result.output_tokens_per_j, rel=1e-3)


def test_a_counter_reset_mid_run_gives_no_negative_or_absurd_energy():
    traits = ServerTraits(metrics="vllm", power=POWER)
    with start_in_thread(Profile(tps=200, ttft_ms=10), traits=traits) as sim:
        root = _root(sim)
        tel = Telemetry(power_url=root + "/dcgm/metrics", power_selector="gpu=0")
        time.sleep(1.0)  # the counter has something to lose

        def reset_while_streaming():
            with httpx.Client() as client:
                while (
                    'running{model_name="simulated"} 1.0' not in client.get(root + "/metrics").text
                ):
                    time.sleep(0.01)
                client.post(root + "/dcgm/reset")

        thread = threading.Thread(target=reset_while_streaming, daemon=True)
        thread.start()
        result = _run(sim, tel, tokens=200)  # 1 s
        thread.join()
        assert result.status == "ok"
        assert result.server_timing["metrics"]["energy"]["reset"] is True
        assert result.energy_j is None  # void: never negative, never a part for the whole
        assert result.output_tokens_per_j is None and result.status == "ok"
    # A jump no GPU can draw is dropped, not stored.
    before = energy_mod.EnergyReading(10.0, 1, 100.0)
    assert energy_mod.delta_j(before, energy_mod.EnergyReading(1e9, 1, 101.0)).energy_j is None
    with pytest.raises(energy_mod.SelectorError):
        Telemetry(power_url="http://x/metrics", power_selector="gpu")
