"""From a workload (a Workload row or a suite seed) to the fields of its requests.

What every kind shares when it turns a workload into requests: the prompt generator's
spec, the seed of each request, the body fields and headers its answer check needs, the
fields holding the answer to its length, and whether its prompts are long enough for a
prefill rate. Plain functions of the workload's data, never its slug.
"""

from __future__ import annotations

import uuid
from typing import Any

from probes.engine import dialects
from probes.engine.contract import PREFILL_MIN_TOKENS
from probes.kinds.checks import WHOLE_ANSWER_CHECKS
from probes.prompts import SIZE_TOLERANCE, PromptSpec

_SEED_NAMESPACE = uuid.UUID("0b7f6f0e-7f53-4a39-9d55-2f1f3c1b9a64")


def prompt_spec(workload: Any) -> PromptSpec:
    """The prompt generator's view of a Workload row (or a WorkloadSeed)."""
    return PromptSpec(
        slug=workload.slug,
        material=workload.material,
        input_tokens=workload.approx_input_tokens or 0,
        instruction=workload.instruction,
        system=workload.system,
        output_tokens=workload.target_output_tokens or workload.max_tokens,
        fixed_messages=list(workload.messages or []),
    )


def measures_prefill(workload: Any) -> bool:
    """Is every prompt of this workload long enough for a prefill rate (the contract's
    PREFILL_MIN_TOKENS, even at the low end of the prompt's size tolerance)? Where only
    some are, the rate would be missing from about half the runs and ranked on the rest."""
    low_end = (workload.approx_input_tokens or 0) * (1 - SIZE_TOLERANCE)
    return low_end >= PREFILL_MIN_TOKENS


def seed_for(run_identity: str) -> int:
    """A 63-bit seed from a run's identity (probe, slot, request): stable, unique."""
    return uuid.uuid5(_SEED_NAMESPACE, run_identity).int >> 65


def seed_at(identity: str, index: int) -> int:
    """Request ``index``'s seed in the run group named ``identity`` (a slot's plan hands
    ``functools.partial(seed_at, identity)`` to the kind)."""
    return seed_for(f"{identity}/{index}")


def request_extras(workload: Any, api: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(body fields, headers) the workload's check needs: a schema or tools."""
    params = workload.params or {}
    dialect = dialects.get(api)  # each API spells a schema or tools its own way
    if workload.answer_check == "json_schema":
        schema = params.get("schema")
        return dialect.structured_body(schema=schema), dialect.structured_headers(schema)
    if workload.answer_check == "tool_call":
        return dialect.structured_body(tools=params.get("tools")), {}
    return {}, {}


def length_fields(workload: Any, control: str, max_tokens: int) -> dict[str, Any]:
    """Body fields holding the answer to the workload's length (an endpoint's
    ``length_control``): ``min_tokens`` no end before the target, ``ignore_eos`` always
    ``max_tokens``. Only where there is a target and the answer may run on: never for a
    checked JSON answer or tool call (padded past its end it fails the check); a voice
    turn's first sentence or a loop step's plan is the same with more after it."""
    target = workload.target_output_tokens
    if not control or not target or workload.answer_check in WHOLE_ANSWER_CHECKS:
        return {}
    if control == "ignore_eos":
        return {"ignore_eos": True}
    return {"min_tokens": min(target, max_tokens)}
