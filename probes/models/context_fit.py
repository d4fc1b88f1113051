"""Does a workload fit an endpoint's context window?

What must fit is the workload's *largest* request: its prompt plus every output token it
may ask for. For most kinds that is the one request (a cached pair sends the same prompt
twice, parallel requests are independent). An agent loop grows: each step appends the
previous answer and a step instruction (probes/kinds/loop.py, ``prompts.follow_up``), so its
last step carries ``requests - 1`` answers of up to ``max_tokens`` each.

Input sizes are o200k_base counts (probes/catalog/workload_suite.py); the served model's
own tokenizer and chat template differ, so what we count with o200k gets a margin.
Answers are counted in the server's own tokens already (``max_tokens`` is), so they get
none. A workload that does not fit is "not applicable" to the endpoint: greyed on the
pages and never run,
rather than a run that ends `truncated` (or a loop whose late steps fail with HTTP 400)
and reads as a failure of the provider.

The formula is written once (``_needed``) and evaluated either on numbers (Python) or on
query expressions (SQL, for Probe querysets); a test checks the two agree.
"""

from __future__ import annotations

import operator
from functools import cache
from typing import Any

from django.db.models import Case, ExpressionWrapper, F, IntegerField, Q, Value, When
from django.db.models.functions import Coalesce

from probes import kinds, prompts
from probes.engine import tokens

# Other tokenizers count up to ~10 % more than o200k on English prose; the chat template
# adds a few dozen tokens of its own. A whole percentage, so that Python and Postgres
# round alike (float 1.1 * 100 is 110.00000000000001 in Python, 110 in Postgres).
INPUT_MARGIN_PCT = 110
TEMPLATE_TOKENS = 64
# What a chat template wraps around each message (role header, end-of-turn): 4-5 tokens
# in Llama 3, ChatML and Gemma templates; rounded up.
MESSAGE_TOKENS = 8
# The widest step numbers and word counts a step instruction can carry (the Workload
# model caps requests at 32; no workload asks for 100,000 words).
_WIDEST_STEP = {"step": 32, "steps": 32, "words": "100,000"}


@cache
def step_tokens() -> int:
    """o200k tokens of the instruction a loop appends at each step (its widest form)."""
    return tokens.count(prompts.LOOP_STEP.format(**_WIDEST_STEP))


def _needed(input_tokens: Any, max_tokens: Any, follow_ups: Any, div: Any) -> Any:
    """Context of the largest request: numbers in, a number out, or expressions in, an
    expression out. ``follow_ups``: answers (and step instructions) that request carries;
    ``div``: integer division rounding down (``//`` in Python, ``/`` on SQL integers)."""
    counted = input_tokens + follow_ups * step_tokens()  # o200k: gets the margin
    with_margin = div(counted * INPUT_MARGIN_PCT + 99, 100)  # rounded up
    per_step = max_tokens + 2 * MESSAGE_TOKENS  # an answer and an instruction, wrapped
    return with_margin + TEMPLATE_TOKENS + follow_ups * per_step + max_tokens


def follow_ups(workload: Any) -> int:
    """Previous answers the workload's largest request carries: a loop's last step has
    all but its own; other kinds none."""
    return max(0, workload.requests - 1) if kinds.of(workload).feeds_answers else 0


def tokens_needed(workload: Any, max_tokens: int | None = None) -> int:
    """Context the workload's largest request needs, margin included. ``max_tokens``: a
    probe's own (else the workload's)."""
    return _needed(
        workload.approx_input_tokens or 0,
        max_tokens or workload.max_tokens,
        follow_ups(workload),
        operator.floordiv,
    )


def fits(context_tokens: int | None, workload: Any, max_tokens: int | None = None) -> bool:
    """True when the context is unknown (nothing to judge by) or large enough."""
    return context_tokens is None or tokens_needed(workload, max_tokens) <= context_tokens


def probe_tokens_needed() -> ExpressionWrapper:
    """``tokens_needed`` of a Probe row in SQL, with the probe's effective max tokens."""
    loop_follow_ups = Case(
        When(
            workload__kind__in=kinds.names("feeds_answers"),
            workload__requests__gt=1,
            then=F("workload__requests") - 1,
        ),
        default=Value(0),
        output_field=IntegerField(),
    )
    needed = _needed(
        Coalesce(F("workload__approx_input_tokens"), Value(0)),
        Coalesce(F("max_tokens"), F("workload__max_tokens")),
        loop_follow_ups,
        operator.truediv,  # integer / integer: Postgres divides rounding down
    )
    return ExpressionWrapper(needed, output_field=IntegerField())


def probe_fits_q() -> Q:
    """``fits`` in SQL, for Probe querysets."""
    return Q(endpoint__context_tokens__isnull=True) | Q(
        endpoint__context_tokens__gte=probe_tokens_needed()
    )
