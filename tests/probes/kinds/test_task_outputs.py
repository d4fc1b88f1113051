"""Tool calls, structured JSON and sentence ends: what the task workloads read.

The simulator answers a request with tools by a call of the first tool, a request with a
JSON schema by an instance of it, and ends a sentence every N tokens when told to.
"""

from __future__ import annotations

import json

import pytest

from probes import kinds
from probes.catalog import workload_suite
from probes.engine import ProbeRequest, measure_sync
from probes.kinds import checks
from probes.kinds import requests as kind_requests
from probes.simulator import SimulatorHandle

APIS = ["openai-chat", "anthropic-messages"]


def _request(sim: SimulatorHandle, api: str, slug: str, model: str = "sim-default") -> tuple:
    workload = workload_suite.get(slug)
    body, headers = kind_requests.request_extras(workload, api)
    req = ProbeRequest(
        api=api,
        base_url=sim.base_url,
        model=model,
        max_tokens=workload.max_tokens,
        extra_body=body,
        extra_headers=headers,
        include_text=kinds.needs_text(workload),
    )
    return workload, measure_sync(req)


@pytest.mark.parametrize("api", APIS)
def test_a_tool_call_is_timed_to_its_last_delta_and_its_arguments_checked(sim, api) -> None:
    workload, result = _request(sim, api, "tool-call")
    assert result.ok, result.error
    (call,) = result.tool_calls
    assert call["name"] == "get_weather"
    assert json.loads(call["arguments"])["unit"] in ("celsius", "fahrenheit")
    assert result.finish_reason in ("tool_calls", "tool_use")
    assert result.ttft_ms < result.tool_call_ms <= result.e2e_ms
    assert checks.verdict(workload, result) == (True, "")


@pytest.mark.parametrize("api", APIS)
def test_structured_json_parses_and_follows_the_schema(sim, api) -> None:
    workload, result = _request(sim, api, "json-schema")
    assert result.ok, result.error
    assert set(json.loads(result.text)) == set(workload.params["schema"]["properties"])
    assert checks.verdict(workload, result) == (True, "")


def test_an_answer_that_breaks_the_schema_is_invalid_with_the_reason(sim) -> None:
    workload, result = _request(sim, "openai-chat", "json-schema")
    result.text = json.dumps(
        {"topics": "not a list", "measurement_count": 1, "summary": "s", "mentions_time": True}
    )
    valid, detail = checks.verdict(workload, result)
    assert valid is False and "topics" in detail
    result.text = "Sure! Here is the JSON"
    assert checks.verdict(workload, result)[0] is False
    result.tool_calls = None
    tool_workload = workload_suite.get("tool-call")
    assert checks.verdict(tool_workload, result) == (False, "the answer was not a tool call")


@pytest.mark.parametrize("api", APIS)
def test_the_first_sentence_ends_at_the_event_carrying_its_full_stop(sim, api) -> None:
    # A full stop every 10th token, one token per event: the 10th answer event ends the
    # first sentence, whatever the machine's load did to the timing.
    _, result = _request(sim, api, "voice-turn", "sim-default@tps=500,ttft=50,sentence=10")
    assert result.ok, result.error
    timeline = result.timeline
    answer_events = [i for i, ch in enumerate(timeline["ch"]) if ch == "a"]
    tenth = timeline["t_us"][answer_events[9]] / 1000
    assert abs(result.first_sentence_ms - tenth) < 0.002, (result.first_sentence_ms, tenth)
    assert result.ttft_ms < result.first_sentence_ms < result.e2e_ms


def test_no_sentence_end_leaves_the_time_unmeasured(sim) -> None:
    _, result = _request(sim, "openai-chat", "voice-turn", "sim-default@tps=2000")
    assert result.ok and result.first_sentence_ms is None
