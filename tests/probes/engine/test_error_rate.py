"""A profile with an error rate fails about that share of requests, with realistic faults
drawn from a seeded generator, so the same requests fail on every run."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from django.core.management import CommandError, call_command

from probes.engine import Limits, ProbeRequest, measure_sync
from probes.simulator import BUILTIN, REALISTIC_FAULTS, Profile, start_in_thread
from probes.simulator.__main__ import build_parser, profile_from

FAST = Limits(connect_s=2, first_token_s=0.5, stall_s=0.2, total_s=5)
# What each realistic fault looks like to the engine.
EXPECTED_STATUS = {
    "rate_limit": "rate_limited",
    "server_error": "server_error",
    "disconnect": "truncated",
    "stall": "timeout_stall",
}


def statuses(base_url: str, model: str, n: int) -> list[str]:
    """The status of each of n sequential requests for `model`."""
    return [
        measure_sync(
            ProbeRequest(
                api="openai-chat", base_url=base_url, model=model, max_tokens=6, limits=FAST
            )
        ).status
        for _ in range(n)
    ]


def test_each_realistic_fault_is_one_the_engine_reports_as_a_failure():
    assert set(EXPECTED_STATUS) == set(REALISTIC_FAULTS)


def test_the_share_of_failed_requests_is_close_to_the_error_rate():
    profile = Profile(error_rate=0.3)
    rng = random.Random(profile.seed)
    faults = Counter(profile.for_request(rng).fault for _ in range(4000))
    failed = 4000 - faults["none"]
    assert failed / 4000 == pytest.approx(0.3, abs=0.03)
    # Every realistic fault turns up, in roughly equal shares.
    for fault in REALISTIC_FAULTS:
        assert faults[fault] / failed == pytest.approx(1 / len(REALISTIC_FAULTS), abs=0.05)


def test_a_profile_without_an_error_rate_never_fails_and_one_at_1_always_does():
    rng = random.Random(1)
    assert {Profile().for_request(rng).fault for _ in range(200)} == {"none"}
    always = Profile(error_rate=1.0, error_faults=("server_error",))
    assert {always.for_request(rng).fault for _ in range(200)} == {"server_error"}


@pytest.mark.parametrize("rate", [-0.1, 1.5])
def test_an_error_rate_outside_0_to_1_is_refused(rate: float):
    with pytest.raises(ValueError, match="error_rate must be in"):
        Profile(error_rate=rate)


def test_an_unknown_fault_in_the_mix_is_refused():
    with pytest.raises(ValueError, match="unknown fault 'gremlins'"):
        Profile(error_rate=0.1, error_faults=("gremlins",))


def test_requests_to_an_erroring_model_fail_at_its_rate_with_the_expected_statuses(sim):
    seen = statuses(sim.base_url, "rate-check@tps=0,ttft=0,errors=0.4,seed=3", 60)
    counts = Counter(seen)
    failed = 60 - counts["ok"]
    assert 0.2 <= failed / 60 <= 0.6, counts
    assert set(counts) - {"ok"} <= set(EXPECTED_STATUS.values()), counts
    assert len(set(counts) - {"ok"}) >= 3, f"expected a mix of faults, got {counts}"


def test_the_same_requests_fail_the_same_way_on_a_fresh_server():
    model = "repeat@tps=0,ttft=0,errors=0.5,seed=11"
    runs = []
    for _ in range(2):
        with start_in_thread(Profile()) as server:
            runs.append(statuses(server.base_url, model, 16))
    assert runs[0] == runs[1]
    assert "ok" in runs[0] and set(runs[0]) != {"ok"}


def test_the_flaky_demo_profile_fails_sometimes_not_always():
    flaky = BUILTIN["sim-flaky"]
    assert 0 < flaky.error_rate < 0.5 and flaky.fault == "none"


def test_the_demo_profiles_run_at_the_speeds_the_seeds_quote():
    speeds = {name: BUILTIN[name].tps for name in ("sim-blazing", "sim-fast", "sim-gpu")}
    assert speeds == {"sim-blazing": 2100, "sim-fast": 400, "sim-gpu": 120}


def test_the_cli_flag_sets_the_default_profiles_error_rate():
    args = build_parser().parse_args(["--error-rate", "0.25"])
    assert profile_from(args).error_rate == 0.25


@pytest.mark.parametrize("value", ["1.5", "-0.2", "often"])
def test_simulate_provider_refuses_an_error_rate_that_is_not_a_probability(value: str):
    with pytest.raises(CommandError, match="expected a probability between 0 and 1"):
        call_command("simulate_provider", "--error-rate", value)
