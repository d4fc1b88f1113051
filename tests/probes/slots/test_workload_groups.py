"""The workload suite through the scheduled path: fresh prompts, run groups, checks.

Real Postgres, Redis and a simulator in a child process (its demo profiles prefill at a
set rate and keep a prompt cache, so cold and warm TTFT differ as at a real provider).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from probes import prompts
from probes.catalog import workload_suite
from probes.kinds import requests as kind_requests
from probes.models import Price, ProbeRun, Workload
from probes.scheduling import caps
from probes.simulator.profiles import BUILTIN
from probes.slots import run as runner

SLOT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db(transaction=True)


def suite_workload(slug: str, **changes) -> Workload:
    """A row of the suite, smaller where that only makes the test slower."""
    fields = workload_suite.get(slug).row_fields() | changes
    return Workload.objects.create(slug=f"t-{slug}", **fields)


def probe_for(make_probe, workload: Workload, model: str = "sim-fast", api: str | None = None):
    probe = make_probe(model)
    probe.workload = workload
    probe.save()
    if api:
        provider = probe.endpoint.provider
        provider.api_style = api
        provider.save()
    return probe


def runs_of(probe) -> list[ProbeRun]:
    return list(ProbeRun.objects.filter(probe=probe).order_by("slot_at", "request_index"))


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
def test_cached_sends_one_fresh_prompt_twice_cold_then_warm(make_probe, api):
    # sim-fast prefills 20,000 tok/s: 4,000 uncached tokens add ~200 ms to the cold TTFT.
    workload = suite_workload("cached-10k", approx_input_tokens=4000, max_tokens=60)
    probe = probe_for(make_probe, workload, api=api)
    Price.objects.filter(endpoint=probe.endpoint).update(cached_input_per_m=Decimal("0.1"))

    runner.run_slot(probe, SLOT, "w1", "local")

    cold, warm, group = runs_of(probe)
    assert [r.role for r in (cold, warm, group)] == ["step", "step", "group"]
    assert cold.prompt_seed == warm.prompt_seed == group.prompt_seed
    assert cold.cached_input_tokens == 0 and warm.cached_input_tokens == warm.input_tokens
    summary = group.group_summary
    assert summary["cold_ttft_ms"] > summary["warm_ttft_ms"] + 120
    assert summary["cache_hit_pct"] == 100.0 and summary["cost_saved_pct"] > 50
    assert group.ttft_ms == warm.ttft_ms and group.status == "ok"
    assert abs(cold.prompt_tokens_o200k - 4000) <= 400
    # The headline is stored on the group row itself, computed from its two requests.
    assert group.cold_ttft_ms == cold.ttft_ms
    assert group.ttft_saved_pct == pytest.approx(100 * (1 - warm.ttft_ms / cold.ttft_ms), abs=0.06)
    cost_saved = 100 * (1 - warm.cost_usd / cold.cost_usd)
    assert group.cost_saved_pct == pytest.approx(float(cost_saved), abs=0.06)
    assert group.cost_saved_pct == summary["cost_saved_pct"] > 50
    assert cold.cold_ttft_ms is cold.ttft_saved_pct is warm.slowdown is None  # group only
    # Prefill: the cold request's rate is the group's (the warm one had nothing to do).
    # Client-side, sim-fast's base TTFT is inside it: tokens / (base + tokens / rate).
    sim = BUILTIN["sim-fast"]
    n = cold.input_tokens
    assert cold.prefill_tps == pytest.approx(n / (sim.ttft_ms / 1e3 + n / sim.prefill_tps), rel=0.1)
    assert warm.prefill_tps is None
    assert group.prefill_tps == summary["cold_prefill_tps"] == cold.prefill_tps

    # The next slot's prompt is new: a cold start again, not a cache hit.
    runner.run_slot(probe, SLOT + timedelta(minutes=1), "w1", "local")
    next_cold = runs_of(probe)[3]
    assert next_cold.prompt_seed != cold.prompt_seed and next_cold.cached_input_tokens == 0


def test_a_long_10k_slot_stores_the_prefill_rate_of_its_fresh_prompt(make_probe):
    # The real size; no base TTFT, so the rate measured is the simulator's own (less the
    # local round trip: a few ms of the 1 s the prompt takes).
    workload = suite_workload("long-10k", max_tokens=60, target_output_tokens=None)
    probe = probe_for(make_probe, workload, model="sim@ttft=0,tps=2000,prefill=10000")
    runner.run_slot(probe, SLOT, "w1", "local")
    (run,) = runs_of(probe)
    assert run.status == "ok" and run.input_tokens == run.prompt_tokens_o200k > 9000
    # The whole fresh prompt over the stored TTFT (a cached prompt would count ten times
    # faster). The simulator prefills at 10,000 tok/s; a late wake-up of its process on a
    # busy machine (60 ms seen) only lengthens the TTFT, so the rate may fall short of it.
    assert run.prefill_tps == pytest.approx(run.input_tokens / (run.ttft_ms / 1000), rel=1e-3)
    assert 9_000 <= run.prefill_tps <= 10_010


def test_a_stored_seed_regenerates_the_prompt_exactly(make_probe):
    workload = suite_workload("standard-1k", max_tokens=40, target_output_tokens=None)
    probe = probe_for(make_probe, workload)
    runner.run_slot(probe, SLOT, "w1", "local")
    (run,) = runs_of(probe)
    messages = prompts.build(kind_requests.prompt_spec(workload), run.prompt_seed)
    assert prompts.input_size(messages) == run.prompt_tokens_o200k
    # The provider's own count of the prompt sits beside ours (the simulator counts o200k).
    assert run.input_tokens == run.prompt_tokens_o200k


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
def test_an_agent_loop_feeds_each_answer_to_the_next_step(make_probe, api):
    workload = suite_workload("agent-loop", requests=3, max_tokens=40, target_output_tokens=40)
    probe = probe_for(make_probe, workload, api=api)

    runner.run_slot(probe, SLOT, "w1", "local")

    *steps, group = runs_of(probe)
    assert [r.request_index for r in steps] == [0, 1, 2] and group.role == "group"
    sizes = [r.prompt_tokens_o200k for r in steps]
    assert sizes[0] < sizes[1] < sizes[2]  # the conversation grows by each answer
    assert group.e2e_ms == pytest.approx(sum(r.e2e_ms for r in steps), abs=0.01)
    assert group.group_summary["step_e2e_ms"] == [r.e2e_ms for r in steps]
    assert group.output_tokens == 120


def test_parallel_needs_the_providers_cap_then_reports_aggregate_and_slowdown(make_probe, client):
    workload = suite_workload("parallel-8", requests=3, max_tokens=80, target_output_tokens=80)
    probe = probe_for(make_probe, workload, model="sim-fast@tps=300,ttft=20")
    with pytest.raises(caps.TooNarrow, match="max concurrency"):
        runner.run_slot(probe, SLOT, "w1", "local")
    assert runs_of(probe) == []  # refused before measuring anything

    provider = probe.endpoint.provider
    provider.max_concurrency = 3
    provider.save()
    runner.run_slot(probe, SLOT, "w1", "local")

    runs = runs_of(probe)
    assert [r.role for r in runs] == ["step"] * 4 + ["group"]
    single, batch, group = runs[0], runs[1:4], runs[4]
    starts = [r.started_at for r in batch]
    assert max(starts) - min(starts) < timedelta(milliseconds=300)  # at once, not in turn
    summary = group.group_summary
    assert summary["concurrency"] == 3
    # Three streams at ~300 tok/s each: about three times one stream's rate.
    assert 2.0 * single.output_tps < summary["aggregate_output_tps"] < 3.6 * single.output_tps
    assert group.output_tps == summary["aggregate_output_tps"]
    assert 0.7 < summary["slowdown"] < 1.5  # the simulator does not slow under load
    streams = sorted(r.output_tps for r in batch)
    assert group.slowdown == summary["slowdown"]
    assert group.slowdown == pytest.approx(single.output_tps / streams[1], abs=0.001)
    # The row fills every column its requests have: first answer as TTFT, the median.
    first_answers = sorted(r.ttfat_ms for r in batch)
    assert group.ttfat_ms == pytest.approx(first_answers[1], abs=0.001)
    assert len({r.prompt_seed for r in runs[:4]}) == 4  # every request its own prompt
    # The row's tokens are the ones its rate counts (the batch's); the cost is everyone's.
    batch_tokens = sum(r.output_tokens for r in batch)
    assert group.output_tokens == summary["batch_output_tokens"] == batch_tokens
    assert summary["single_output_tokens"] == single.output_tokens
    assert group.output_tps == pytest.approx(batch_tokens / (summary["wall_ms"] / 1e3), rel=1e-3)
    assert group.cost_usd == sum(r.cost_usd for r in runs[:4]) > sum(r.cost_usd for r in batch)
    page = client.get(f"/runs/{group.pk}/").content.decode()
    assert f"the batch's {batch_tokens:,} output tokens" in page
    assert "for the whole group (every request" in page


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages"])
@pytest.mark.parametrize("slug", ["json-schema", "tool-call"])
def test_structured_answers_are_checked_and_stored(make_probe, api, slug):
    probe = probe_for(make_probe, suite_workload(slug), api=api)
    runner.run_slot(probe, SLOT, "w1", "local")
    (run,) = runs_of(probe)
    assert run.status == "ok" and run.output_valid is True and run.check_detail == ""
    if slug == "tool-call":
        assert run.ttft_ms <= run.tool_call_ms <= run.e2e_ms


def test_a_voice_turn_stores_the_end_of_its_first_sentence(make_probe):
    probe = probe_for(make_probe, suite_workload("voice-turn"))  # sim-fast: 16-token sentences
    runner.run_slot(probe, SLOT, "w1", "local")
    (run,) = runs_of(probe)
    assert run.ttft_ms < run.first_sentence_ms < run.e2e_ms


def test_a_run_stopping_far_short_of_its_target_is_flagged(make_probe):
    workload = suite_workload("chat-short", max_tokens=300, target_output_tokens=300)
    probe = probe_for(make_probe, workload, model="sim-fast@tokens=60")
    runner.run_slot(probe, SLOT, "w1", "local")
    (run,) = runs_of(probe)
    assert run.status == "ok" and run.stopped_short and not run.short_output


def test_a_redelivered_group_cut_short_is_closed_not_rerun(make_probe):
    workload = suite_workload("cached-10k", approx_input_tokens=300, max_tokens=30)
    probe = probe_for(make_probe, workload)
    runner.run_slot(probe, SLOT, "w1", "local")
    ProbeRun.objects.filter(probe=probe, request_index__gte=1).delete()  # died after step 0

    runner.run_slot(probe, SLOT, "w2", "local")

    runs = runs_of(probe)
    assert [(r.request_index, r.role) for r in runs] == [(0, "step"), (2, "group")]
    assert runs[1].status == "truncated" and runs[1].group_summary["interrupted"]
