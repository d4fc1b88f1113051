"""Fresh, reproducible prompts (probes/prompts) and the suite's sizes."""

from __future__ import annotations

import pytest

from probes import prompts
from probes.catalog import workload_suite
from probes.kinds import requests as kind_requests
from probes.prompts import SIZE_TOLERANCE


@pytest.mark.parametrize(
    "seed_spec", [w for w in workload_suite.WORKLOADS if w.approx_input_tokens]
)
def test_every_sized_workload_lands_within_ten_percent_of_its_target(seed_spec) -> None:
    spec = kind_requests.prompt_spec(seed_spec)
    target = seed_spec.approx_input_tokens
    for seed in range(12):
        size = prompts.input_size(prompts.build(spec, seed))
        assert abs(size - target) <= SIZE_TOLERANCE * target, (seed_spec.slug, seed, size)


def test_the_same_seed_gives_the_same_bytes_and_another_seed_another_prefix() -> None:
    spec = kind_requests.prompt_spec(workload_suite.get("long-10k"))
    a1, a2, b = prompts.build(spec, 7), prompts.build(spec, 7), prompts.build(spec, 8)
    assert a1 == a2
    # No shared prefix a prompt cache could serve: the very first message differs early.
    first_a, first_b = a1[0]["content"], b[0]["content"]
    common = next(i for i, (x, y) in enumerate(zip(first_a, first_b, strict=False)) if x != y)
    assert common < 40
    assert a1[-1]["content"] != b[-1]["content"]


def test_a_seed_is_derived_from_the_runs_identity_and_is_stable() -> None:
    assert kind_requests.seed_for("12/2026-01-01T00:00:00+00:00/0") == kind_requests.seed_for(
        "12/2026-01-01T00:00:00+00:00/0"
    )
    seeds = {kind_requests.seed_for(f"12/2026-01-01T00:00:00+00:00/{i}") for i in range(100)}
    assert len(seeds) == 100 and all(0 <= s < 2**63 for s in seeds)


def test_code_refactor_sends_the_whole_sample_in_a_seeded_order() -> None:
    spec = kind_requests.prompt_spec(workload_suite.get("code-refactor"))
    one, two = prompts.build(spec, 1)[-1]["content"], prompts.build(spec, 2)[-1]["content"]
    for block in prompts.code_blocks():
        assert block in one and block in two
    assert one != two


def test_the_puzzle_has_the_solution_its_comment_claims() -> None:
    spec = kind_requests.prompt_spec(workload_suite.get("reasoning"))
    text = prompts.build(spec, 3)[-1]["content"]
    assert "Three friends" in text and "step by step" in text


def test_a_loop_step_carries_the_conversation_and_the_previous_answer() -> None:
    spec = kind_requests.prompt_spec(workload_suite.get("agent-loop"))
    first = prompts.build(spec, 5)
    second = prompts.follow_up(spec, first, "1. Count rain.", 1, 10)
    assert second[: len(first)] == first
    assert second[len(first)] == {"role": "assistant", "content": "1. Count rain."}
    assert "Step 2 of 10" in second[-1]["content"]


def test_fixed_material_sends_the_stored_messages_unchanged() -> None:
    messages = [{"role": "user", "content": "Exactly this."}]
    spec = prompts.PromptSpec(slug="x", material="fixed", fixed_messages=messages)
    assert prompts.build(spec, 1) == messages == prompts.build(spec, 2)


# Anthropic's structured outputs (generally available since the beta): the schema goes in
# output_config.format, no beta header; every object must close additionalProperties and no
# numeric or length bounds are allowed, else the API answers 400.
_UNSUPPORTED_BY_ANTHROPIC = {"minimum", "maximum", "minLength", "maxLength", "pattern"}


def _objects_and_keys(schema):
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _objects_and_keys(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _objects_and_keys(value)


def test_anthropic_gets_the_generally_available_structured_output_form() -> None:
    workload = workload_suite.get("json-schema")
    body, headers = kind_requests.request_extras(workload, "anthropic-messages")
    assert body == {
        "output_config": {"format": {"type": "json_schema", "schema": workload.params["schema"]}}
    }
    assert headers == {}


@pytest.mark.parametrize("slug", ["json-schema", "tool-call"])
def test_the_suites_schemas_are_ones_anthropic_accepts(slug) -> None:
    params = workload_suite.get(slug).params
    schemas = (
        [params["schema"]] if "schema" in params else [t["parameters"] for t in params["tools"]]
    )
    for schema in schemas:
        for node in _objects_and_keys(schema):
            assert not _UNSUPPORTED_BY_ANTHROPIC & node.keys(), node
            if node.get("type") == "object":
                assert node.get("additionalProperties") is False, node
