"""The measure and simulate_provider commands, as a user runs them."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys

import orjson
import pytest
from django.core.management import CommandError, call_command

from probes.catalog import workload_suite
from probes.engine import STATUSES, tokens
from probes.simulator import SimulatorHandle
from tests.conftest import ROOT


def manage(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.setdefault("INFERWATCH_ENV", "test")
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def measure(*args: str) -> str:
    out = io.StringIO()
    call_command("measure", *args, stdout=out)
    return out.getvalue()


def test_json_output_is_one_object_per_run_with_the_contract_fields(sim: SimulatorHandle) -> None:
    out = measure(
        "--base-url",
        sim.base_url,
        "--model",
        "m@tps=1000,ttft=10",
        "--prompt",
        "hi",
        "--max-tokens",
        "60",
        "--repeat",
        "2",
        "--json",
    )
    runs = [orjson.loads(line) for line in out.splitlines()]
    assert len(runs) == 2
    for run in runs:
        assert run["status"] == "ok" and run["output_tokens"] == 60
        for name in (
            "ttfb_ms",
            "ttft_ms",
            "ttfat_ms",
            "e2e_ms",
            "output_tps",
            "e2e_tps",
            "itl_ms_p99",
            "tpot_ms",
            "token_source",
            "methodology_version",
            "usage",
            "server_timing",
            "timeline",
            "retry_after_s",
            "http_status",
            "error",
        ):
            assert name in run
        assert "text" not in run


def test_include_text_adds_the_received_text(sim: SimulatorHandle) -> None:
    out = measure(
        "--base-url",
        sim.base_url,
        "--model",
        "m@tps=1000,ttft=5,reasoning=3",
        "--prompt",
        "hi",
        "--max-tokens",
        "8",
        "--json",
        "--include-text",
    )
    run = orjson.loads(out)
    assert len(run["text"].split()) == 5 and len(run["reasoning_text"].split()) == 3


def test_a_failed_measurement_is_a_result_not_an_error(sim: SimulatorHandle) -> None:
    out = measure(
        "--base-url",
        sim.base_url,
        "--model",
        "m@fault=rate_limit",
        "--api",
        "anthropic-messages",
        "--workload",
        "short",
    )
    assert "rate_limited" in out and "429" in out and "error:" in out


def test_the_table_has_one_row_per_run(sim: SimulatorHandle) -> None:
    out = measure(
        "--base-url",
        sim.base_url,
        "--model",
        "m@tps=2000,ttft=5",
        "--workload",
        "short",
        "--repeat",
        "3",
    )
    lines = out.splitlines()
    assert lines[0].startswith("run") and "ttft ms" in lines[0]
    assert [line.split()[0] for line in lines[1:]] == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workload", "nope"], "unknown workload"),
        (["--max-tokens", "0"], "--max-tokens"),
        (["--repeat", "0"], "--repeat"),
        (["--api-key-env", "INFERWATCH_SURELY_UNSET"], "INFERWATCH_SURELY_UNSET is not set"),
    ],
)
@pytest.mark.django_db  # an unknown slug is looked up among the admin's workloads too
def test_bad_arguments_raise_a_clear_error(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        measure("--base-url", "http://127.0.0.1:9/v1", "--model", "m", *args)


def test_bad_arguments_exit_non_zero_from_the_shell() -> None:
    result = manage("measure", "--base-url", "ftp://example.com", "--model", "m")
    assert result.returncode != 0
    assert "base_url must start with http" in result.stderr
    result = manage("measure", "--model", "m")
    assert result.returncode != 0 and "--base-url" in result.stderr


def test_simulate_provider_serves_what_measure_measures() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ)
    env.setdefault("INFERWATCH_ENV", "test")
    server = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "simulate_provider",
            "--port",
            str(port),
            "--tps",
            "800",
            "--ttft-ms",
            "30",
            "--tokens-per-event",
            "2",
            "--api",
            "openai-chat",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout.readline().startswith("listening on")
        result = manage(
            "measure",
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
            "--model",
            "anything",
            "--prompt",
            "hi",
            "--max-tokens",
            "80",
            "--json",
        )
        assert result.returncode == 0, result.stderr
        run = orjson.loads(result.stdout)
        assert run["status"] == "ok" and run["tokens_per_event"] == 2.0
        assert run["output_tps"] == pytest.approx(800, rel=0.1)
        # --api openai-chat: the Anthropic path is not served.
        result = manage(
            "measure",
            "--base-url",
            f"http://127.0.0.1:{port}/v1",
            "--model",
            "x",
            "--api",
            "anthropic-messages",
            "--prompt",
            "hi",
            "--json",
        )
        assert orjson.loads(result.stdout)["status"] == "not_found"
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_workload_slugs_are_unique_and_old_slugs_still_resolve() -> None:
    assert len({w.slug for w in workload_suite.WORKLOADS}) == len(workload_suite.WORKLOADS)
    assert workload_suite.get("chat-1k") is workload_suite.get("standard-1k")
    assert workload_suite.get("short") is workload_suite.get("chat-short")
    assert set(STATUSES) >= {"ok", "empty"}


def test_every_simulator_word_is_one_o200k_token() -> None:
    from probes.simulator.vocab import WORDS

    assert all(tokens.count(w) == 1 for w in WORDS)
    assert tokens.count("".join(WORDS)) == len(WORDS)
