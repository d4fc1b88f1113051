"""Holding answers to their length: min_tokens and ignore_eos, where they are safe.

A model that ends its answer early (the simulator's ``@tokens=N``: its end of sequence)
stops far short of the workload's target: flagged, never ranked on speed. An endpoint's
``length_control`` holds the end off, as vLLM does; never for an answer that is checked,
which must end where the model ends it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from dashboard.queries import filters as query_filters
from dashboard.queries import leaderboard as leaderboards
from probes.catalog import workload_suite
from probes.engine import ProbeRequest, measure_sync
from probes.kinds import checks
from probes.kinds import requests as kind_requests
from probes.models import ProbeRun, Workload
from probes.slots import plan as slot_plan
from tests.counted_runs import run_slot_counted

SLOT = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
# The model ends its answers after 60 tokens, whatever it was asked for.
EARLY = "sim-fast@tps=4000,ttft=10,tokens=60"
pytestmark = pytest.mark.django_db(transaction=True)


def suite_workload(slug: str, **changes) -> Workload:
    return Workload.objects.create(slug=slug, **(workload_suite.get(slug).row_fields() | changes))


@pytest.mark.parametrize(
    ("slug", "control", "sent"),
    [
        ("standard-1k", "", {}),
        ("standard-1k", "min_tokens", {"min_tokens": 1000}),
        ("standard-1k", "ignore_eos", {"ignore_eos": True}),
        ("voice-turn", "ignore_eos", {"ignore_eos": True}),  # its first sentence is the same
        ("agent-loop", "min_tokens", {"min_tokens": 200}),
        # Checked answers end where the model ends them; these have no target either.
        ("json-schema", "ignore_eos", {}),
        ("tool-call", "min_tokens", {}),
        ("reasoning", "ignore_eos", {}),
    ],
)
def test_which_workloads_get_the_endpoints_length_control(slug, control, sent):
    workload = workload_suite.get(slug)
    assert kind_requests.length_fields(workload, control, workload.max_tokens) == sent


def test_a_checked_answer_never_gets_one_even_with_a_target():
    json_with_target = Workload(answer_check="json_schema", target_output_tokens=300)
    assert kind_requests.length_fields(json_with_target, "ignore_eos", 400) == {}
    # min_tokens never asks for more than max_tokens (a probe may lower it).
    standard = workload_suite.get("standard-1k")
    assert kind_requests.length_fields(standard, "min_tokens", 700) == {"min_tokens": 700}


def test_the_endpoints_settings_reach_the_request(make_probe):
    probe = make_probe(EARLY)
    probe.workload = suite_workload("standard-1k")
    probe.max_tokens = 900
    probe.save()
    endpoint = probe.endpoint
    endpoint.token_counter, endpoint.length_control = "vllm", "min_tokens"
    endpoint.save()
    req = slot_plan.build_request(probe, None, None)
    assert req.token_counter == "vllm" and req.extra_body["min_tokens"] == 900

    endpoint.length_control, endpoint.extra_body = "ignore_eos", {"ignore_eos": False}
    endpoint.save()
    req = slot_plan.build_request(probe, None, None)
    assert req.extra_body == {"ignore_eos": False}  # the operator's extra_body wins


@pytest.mark.parametrize(
    ("control", "output_tokens"), [("", 60), ("min_tokens", 200), ("ignore_eos", 300)]
)
def test_a_model_that_stops_early_is_flagged_unless_the_end_is_held_off(
    make_probe, control, output_tokens
):
    workload = suite_workload("chat-short", max_tokens=300, target_output_tokens=200)
    probe = make_probe(EARLY)
    probe.workload = workload
    probe.save()
    probe.endpoint.length_control = control
    probe.endpoint.save()

    run_slot_counted(probe, SLOT)  # a run our own loop mis-timed would not rank either

    run = ProbeRun.objects.get(probe=probe)
    assert run.status == "ok" and run.output_tokens == output_tokens
    assert run.stopped_short is (not control)
    board = leaderboards.leaderboard(query_filters.parse_filters({"workload": "chat-short"}))
    (row,) = board.rows
    ranked = row.agg.percentile("output_tps", 50)
    assert (ranked is not None) is bool(control)  # a run stopped short is not ranked


def test_ignore_eos_pads_a_json_answer_past_its_end(sim):
    """Why a checked workload never gets it: the same answer, held on, fails its check."""
    workload = workload_suite.get("json-schema")
    body, headers = kind_requests.request_extras(workload, "openai-chat")
    verdicts = []
    for extra in ({}, {"ignore_eos": True}):
        req = ProbeRequest(
            api="openai-chat", base_url=sim.base_url, model="sim-fast@tps=0,ttft=5",
            max_tokens=workload.max_tokens, extra_body=body | extra, extra_headers=headers,
            include_text=True,
        )  # fmt: skip
        result = measure_sync(req)
        verdicts.append((checks.verdict(workload, result)[0], result.output_tokens))
    (valid, natural), (padded_valid, padded) = verdicts
    assert valid is True and natural < workload.max_tokens
    assert padded_valid is False and padded == workload.max_tokens


def test_the_migration_keeps_endpoints_that_sent_min_tokens_sending_it():
    before, after = [("probes", "0007_workload_suite")], [("probes", "0008_length_control")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    provider = old.get_model("probes", "Provider").objects.create(
        name="V", slug="v", base_url="http://127.0.0.1:9/v1"
    )
    model = old.get_model("probes", "CanonicalModel").objects.create(name="M", slug="m")
    Endpoint = old.get_model("probes", "Endpoint")
    for model_id, send in (("sends", True), ("plain", False)):
        Endpoint.objects.create(
            provider=provider, canonical_model=model, model_id=model_id, send_min_tokens=send
        )

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    new = executor.loader.project_state(after).apps.get_model("probes", "Endpoint")
    controls = dict(new.objects.values_list("model_id", "length_control"))
    assert controls == {"sends": "min_tokens", "plain": ""}

    executor = MigrationExecutor(connection)
    executor.migrate(before)  # and back
    sent = dict(Endpoint.objects.values_list("model_id", "send_min_tokens"))
    assert sent == {"sends": True, "plain": False}
    MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
