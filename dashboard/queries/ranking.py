"""Rank: the one rule that numbers a board's rows, orders them and says why a row has no
number. Every board, chart and API answer takes its rank, order and reason from here.

A row ranks only with at least settings.RANK_MIN_OK_RUNS successful runs that its rank
metric counts in the window (stated on /methodology/): a run our own client may have set
(client-bound) or one too short for a speed is left out (contract.counts_for_metric).
The others are listed after the ranked rows, each with the reason that applied: the
endpoint needs a key or is disabled, it has no runs or no successful run, too few runs
counted (saying how many were left out and why), every run client-bound, or answers too
short to rank on speed.

Rows are duck-typed (leaderboard.Row): endpoint, agg, not_applicable, figure(key),
sort_value(key), rank and unranked_reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from dashboard.definitions import METRICS
from dashboard.models import ROLLUP_METRICS
from probes.engine.contract import SPEED_METRICS
from probes.engine.left_out import LEFT_OUT_WHY


def min_ok_runs() -> int:
    return settings.RANK_MIN_OK_RUNS


def not_measured_reason(endpoint) -> str:
    """Why no probe measures an endpoint ("needs a key", …), or "" when one may."""
    provider = endpoint.provider
    if provider.requires_key and not provider.has_key:
        return "needs a key"
    if not provider.enabled:
        return "provider disabled"
    return "" if endpoint.enabled else "endpoint disabled"


def unranked_reason(row, metric: str) -> str:
    """Why a row has no rank, in the reader's words; "" when it may rank."""
    if row.not_applicable:
        return "The workload does not fit this endpoint's context."
    why = not_measured_reason(row.endpoint)
    if why and not row.agg.runs:
        return f"Not measured: {why}."
    if not row.agg.runs:
        return "No runs in this window."
    agg, needed = row.agg, min_ok_runs()
    if not agg.ok_runs:
        return "No successful run in this window."
    counted = counted_runs(row, metric)
    if counted >= needed:
        return ""
    left_out = left_out_reasons(agg, metric, counted)
    if not left_out:
        return f"Too few runs: {counted} successful in this window, {needed} needed to rank."
    if counted:
        return f"Too few runs: {counted} counted in this window, {needed} needed to rank{left_out}."
    if agg.client_bound_runs >= agg.ok_runs:
        return (
            f"Every successful run was {LEFT_OUT_WHY['client_bound'][0]} (our own measuring "
            "loop lagged): none counts."
        )
    if metric in SPEED_METRICS and not agg.client_bound_runs:
        return "Answers too short to rank on speed."
    return f"No {METRICS[metric].label.lower()} counted in this window{left_out}."


def counted_runs(row, metric: str) -> int:
    """The window's runs that `metric`'s figure rests on: those its statistics count; for
    a figure not rolled up (a parallel batch's per-stream speed) every successful run,
    once it has a figure at all."""
    if metric in ROLLUP_METRICS:
        return row.agg.counted(metric)
    return row.agg.ok_runs if row.figure(metric) is not None else 0


def left_out_reasons(agg, metric: str, counted: int) -> str:
    """ ", left out: 2 client-bound, 1 too short", of the successful runs `metric` does not
    count (contract.counts_for_metric); "" when none was left out."""
    bound = min(agg.client_bound_runs, agg.ok_runs)
    other = max(agg.ok_runs - counted - bound, 0)
    parts = [f"{bound} {LEFT_OUT_WHY['client_bound'][0]}"] if bound else []
    if other:
        why = LEFT_OUT_WHY["short_output"][0] if metric in SPEED_METRICS else "without it"
        parts.append(f"{other} {why}")
    return f"; left out: {', '.join(parts)}" if parts else ""


def rank(rows: Sequence, metric: str, sort_key: str, descending: bool) -> list:
    """Number the rows that may rank by their `metric` median, best first (ties share
    a number), give the others their reason, and return the board's order: the ranked
    rows sorted as asked, then the unranked ones, the not-applicable ones last."""
    better_higher = METRICS[metric].better == "higher"
    for row in rows:
        row.unranked_reason = unranked_reason(row, metric)
        row.rank = None
    ranked = [r for r in rows if not r.unranked_reason]
    ranked.sort(key=lambda r: -r.figure(metric) if better_higher else r.figure(metric))
    previous, place = None, 0
    for i, row in enumerate(ranked, start=1):
        value = row.figure(metric)
        if value != previous:
            place, previous = i, value
        row.rank = place
    unranked = [r for r in rows if r.rank is None and not r.not_applicable]
    greyed = sorted((r for r in rows if r.not_applicable), key=lambda r: r.sort_value("provider"))
    return (
        sort_rows(ranked, sort_key, descending) + sort_rows(unranked, sort_key, descending) + greyed
    )


def sort_rows(rows: Sequence, key: str, descending: bool) -> list:
    """Sorted by `key`; rows without a value always last, whatever the direction."""
    with_value = [r for r in rows if r.sort_value(key) is not None]
    without = [r for r in rows if r.sort_value(key) is None]
    with_value.sort(key=lambda r: r.sort_value(key), reverse=descending)
    without.sort(key=lambda r: r.sort_value("provider"))
    return with_value + without
