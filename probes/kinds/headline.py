"""A workload's leaderboard columns and ranking figure, read from its data (its kind,
answer check and prompt size), never its slug: an admin-added workload (parallel-16,
another JSON task) gets the same columns as the suite's own."""

from __future__ import annotations

from typing import Any

from probes import kinds
from probes.kinds.checks import WHOLE_ANSWER_CHECKS
from probes.kinds.requests import measures_prefill


def headline_metrics(workload: Any) -> frozenset[str]:
    """The leaderboard columns this workload has beyond the common ones.

    Names are the contract's rolled-up metrics, ``valid_share`` (of the window's
    checked answers, the share that passed: rollups count both) and ``stream_tps`` (a
    concurrent batch's per-request speed, dashboard/queries/streams.py).
    """
    shown = set(kinds.of(workload).headline)
    if measures_prefill(workload):
        shown.add("prefill_tps")
    if workload.answer_check == "first_sentence":
        shown.add("first_sentence_ms")
    if workload.answer_check == "tool_call":
        shown.add("tool_call_ms")
    if workload.answer_check in WHOLE_ANSWER_CHECKS:
        shown.add("valid_share")
    return frozenset(shown)


def rank_metric(workload: Any) -> str:
    """The figure a workload's board ranks by: the complete tool call, the first
    sentence of a voice turn, then the kind's own (a loop's total time, a parallel
    batch's per-stream speed); TTFT for another checked whole answer (a JSON object is
    too short to rank on speed); output speed for the rest."""
    if workload.answer_check == "tool_call":
        return "tool_call_ms"
    if workload.answer_check == "first_sentence":
        return "first_sentence_ms"
    own = kinds.of(workload).rank_metric
    if own:
        return own
    if workload.answer_check in WHOLE_ANSWER_CHECKS:
        return "ttft_ms"
    return "output_tps"
