"""Does a workload fit an endpoint's context window?

A request needs room for its prompt and for every output token it may ask for. Input
sizes are o200k_base counts (probes/workloads.py); the served model's own tokenizer and
chat template differ, so the prompt gets a margin. A workload that does not fit is "not
applicable" to the endpoint: greyed on the pages and never run, rather than a run that
ends `truncated` and reads as a failure of the provider.
"""

from __future__ import annotations

import math

from django.db.models import ExpressionWrapper, F, IntegerField, Q, Value
from django.db.models.functions import Ceil, Coalesce

# Other tokenizers count up to ~10 % more than o200k on English prose; the chat template
# adds a few dozen tokens of its own.
INPUT_MARGIN = 1.10
TEMPLATE_TOKENS = 64


def tokens_needed(input_tokens: int | None, max_tokens: int) -> int:
    """Context a request of this size needs, margin included."""
    return math.ceil((input_tokens or 0) * INPUT_MARGIN) + TEMPLATE_TOKENS + max_tokens


def fits(context_tokens: int | None, input_tokens: int | None, max_tokens: int) -> bool:
    """True when the context is unknown (nothing to judge by) or large enough."""
    return context_tokens is None or tokens_needed(input_tokens, max_tokens) <= context_tokens


def probe_fits_q() -> Q:
    """The same test in SQL, for Probe querysets."""
    needed = ExpressionWrapper(
        Ceil(Coalesce(F("workload__approx_input_tokens"), Value(0)) * INPUT_MARGIN)
        + TEMPLATE_TOKENS
        + Coalesce(F("max_tokens"), F("workload__max_tokens")),
        output_field=IntegerField(),
    )
    return Q(endpoint__context_tokens__isnull=True) | Q(endpoint__context_tokens__gte=needed)
