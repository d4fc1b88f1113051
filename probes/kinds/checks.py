"""Per-workload verdicts on an answer: JSON and tool calls valid, stopped far short.

Plain functions of the workload (a row or a seed) and the engine's RunResult; the slot's
judge stage (probes/slots/judge.py) stores what they return beside the run. Answer checks
cut across the kinds (a single request or a loop's steps may be checked alike).
"""

from __future__ import annotations

import json
from typing import Any

from probes.engine import scrub
from probes.engine.result import RunResult
from probes.kinds import schemas

# A run whose output is below this share of the workload's target "stopped far short":
# flagged and kept out of speed rankings (the instruction asked for more).
SHORT_SHARE = 0.5
# Checks whose verdict reads the whole answer: it must end where the model ends it (a
# JSON object or a tool call padded past its end no longer parses).
WHOLE_ANSWER_CHECKS = ("json_schema", "tool_call")
# Details are scrubbed of the secrets in force, then cut (scrub.cut): the slot's run
# puts every live secret in force (probes/slots/run.py).
_DETAIL_MAX = 300


def needs_text_to_check(workload: Any) -> bool:
    """Whether the check reads the answer's text (a tool call comes back parsed)."""
    return workload.answer_check == "json_schema"


def stopped_short(workload: Any, result: RunResult) -> bool:
    target = workload.target_output_tokens
    if not target or not result.ok or result.output_tokens is None:
        return False
    return result.output_tokens < SHORT_SHARE * target


def _parse(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, f"not JSON: {exc}"


def verdict(workload: Any, result: RunResult) -> tuple[bool | None, str]:
    """(valid, detail) for a checked workload's ok run; (None, "") when not checked."""
    if not result.ok or workload.answer_check not in WHOLE_ANSWER_CHECKS:
        return None, ""
    params = workload.params or {}
    if workload.answer_check == "json_schema":
        value, error = _parse((result.text or "").strip())
        if error is None:
            error = schemas.error(value, params.get("schema") or {})
        return error is None, scrub.cut(error or "", _DETAIL_MAX)
    calls = result.tool_calls or []
    if not calls:
        return False, "the answer was not a tool call"
    tools = {t.get("name"): t for t in params.get("tools") or [] if isinstance(t, dict)}
    call = calls[0]
    tool = tools.get(call.get("name"))
    if tool is None:
        return False, scrub.cut(f"called an unknown tool {call.get('name')!r}", _DETAIL_MAX)
    value, error = _parse(call.get("arguments") or "")
    if error is None:
        error = schemas.error(value, tool.get("parameters") or {})
    return error is None, scrub.cut(error or "", _DETAIL_MAX)


# What a visitor sees of a failed check: our words for the kind of failure, never the
# detail, which quotes the provider's answer (staff see it whole).
_PUBLIC_DETAIL = (
    ("not JSON", "not JSON"),
    ("schema:", "breaks the schema"),
    ("the workload's schema", "the workload's schema is at fault"),
    ("the answer was not a tool call", "not a tool call"),
    ("called an unknown tool", "called an unknown tool"),
)


def public_detail(detail: str) -> str:
    """``detail`` in our words (a check's category), or "" when there is none."""
    if not detail:
        return ""
    return next((words for start, words in _PUBLIC_DETAIL if detail.startswith(start)), "failed")
