"""The demo's alert (issue 18 item 7): the simulated LPU slows down 20 minutes after the
simulator starts (and every 3 hours after), and the demo's regression rule fires on it.

Real parts: the simulator over HTTP, the measuring engine, Postgres and the evaluator.
Runs measured against the simulator are recorded as a probe would record them, at the
minutes they would have run (one a minute, as the demo probes): the first twenty minutes
at normal speed, then ten minutes into the episode slowed.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboard.alerts import evaluator
from dashboard.alerts.demo import DEMO_RULE, DEMO_WORKLOAD
from dashboard.alerts.models import AlertEvent, AlertRule
from probes import prompts
from probes.catalog.loader import load_demo
from probes.engine import Limits, ProbeRequest, measure
from probes.kinds.requests import prompt_spec, seed_for
from probes.models import Probe, ProbeRun, Workload
from probes.recording import recorder
from probes.recording.recorder import RunContext
from probes.simulator import BUILTIN, start_in_process

MINUTE = 60


def test_the_lpu_profile_slows_down_early_and_every_three_hours():
    lpu = BUILTIN["sim-fast"]
    slow = [m for m in range(0, 8 * 60) if lpu.in_episode(m * MINUTE)]
    assert slow[0] == 20 and len(slow) == 3 * 20  # three episodes of 20 minutes in 8 hours
    assert lpu.in_episode(3 * 3600 + 25 * MINUTE) and not lpu.in_episode(45 * MINUTE)
    assert lpu.at(25 * MINUTE).ttft_ms == 3 * lpu.ttft_ms
    assert lpu.at(25 * MINUTE).tps == lpu.tps / 3
    # Prefill slows with the rest: the whole TTFT of a long prompt is three times longer.
    assert lpu.at(25 * MINUTE).prefill_tps == lpu.prefill_tps / 3
    assert lpu.at(5 * MINUTE) is lpu


def _measured(base_url: str, model: str, count: int, workload: Workload | None = None):
    """`count` runs of `model`; with a workload, each sends a fresh prompt of it, as the
    probe's slots do (a prompt the simulator has seen is cached: no prefill)."""

    def messages(index: int) -> list[dict]:
        if workload is None:
            return [{"role": "user", "content": "Say something."}]
        return prompts.build(prompt_spec(workload), seed_for(f"{model}/{index}"))

    async def runs():
        return [
            await measure(
                ProbeRequest(
                    api="openai-chat",
                    base_url=base_url,
                    model=model,
                    messages=messages(index),
                    max_tokens=16,
                    limits=Limits(first_token_s=5, stall_s=2, total_s=10),
                )
            )
            for index in range(count)
        ]

    # On a thread of its own: the test's thread may own an event loop already.
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, runs()).result()


def demo_run_context(rule: AlertRule) -> RunContext:
    """How the demo's probe of the rule's series records a run."""
    probe = Probe.objects.get(endpoint=rule.endpoint, workload=rule.workload, region="local")
    return RunContext(
        endpoint_id=probe.endpoint_id,
        workload_id=probe.workload_id,
        region="local",
        worker="demo-test",
        probe_id=probe.pk,
        price=probe.endpoint.current_price,
    )


@pytest.mark.django_db
def test_the_demo_rule_fires_on_the_simulated_slowdown_and_the_page_shows_it(client):
    with start_in_process() as sim:
        load_demo("local", sim.base_url.removesuffix("/v1"))
        normal = _measured(sim.base_url, "sim-fast", 4)
        # The same profile in its episode (from the first second instead of minute 20).
        slowed = _measured(sim.base_url, "sim-fast@episode_first=0", 4)
    assert all(r.status == "ok" for r in normal + slowed)
    assert min(r.ttft_ms for r in slowed) > 2 * max(r.ttft_ms for r in normal)

    rule = AlertRule.objects.get(name=DEMO_RULE)
    assert rule.endpoint.provider.slug == "lpu-demo" and rule.workload.slug == DEMO_WORKLOAD
    ctx = demo_run_context(rule)
    now = timezone.now()
    runs = []
    # The first hour of `make run`: one run a minute from the start, the episode from
    # minute 20; ten minutes into it (minute 30) the rule decides.
    for minute in range(30, 0, -1):
        result = (slowed if minute <= 10 else normal)[minute % 4]
        fields = {**recorder.run_fields(result, ctx), "timeline": None}
        fields["started_at"] = now - timedelta(minutes=minute, seconds=-30)
        runs.append(ProbeRun(**fields))
    ProbeRun.objects.bulk_create(runs)

    evaluator.evaluate_rule(rule, now)
    event = AlertEvent.objects.get(rule=rule)
    assert event.state == AlertEvent.FIRING
    assert event.recent_value > 2 * event.baseline_value

    index = client.get("/alerts/").content.decode()
    firing = index[index.index('id="active-alerts"') : index.index('id="silences"')]
    assert DEMO_RULE in firing and f'href="/alerts/{event.pk}/"' in firing
    detail = client.get(f"/alerts/{event.pk}/").content.decode()
    assert 'id="alert-chart"' in detail


@pytest.mark.django_db
def test_reloading_the_demo_keeps_an_operators_edit_of_the_rule():
    load_demo("local", "http://127.0.0.1:9")
    AlertRule.objects.filter(name=DEMO_RULE).update(enabled=False, regression_pct=80)
    load_demo("local", "http://127.0.0.1:9")
    rule = AlertRule.objects.get(name=DEMO_RULE)
    assert (rule.enabled, rule.regression_pct) == (False, 80)
