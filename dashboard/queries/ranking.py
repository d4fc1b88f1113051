"""Rank: the one rule that numbers a board's rows, orders them and says why a row has no
number. Every board, chart and API answer takes its rank, order and reason from here.

A row ranks only with at least settings.RANK_MIN_OK_RUNS successful runs in the window
(stated on /methodology/) and a figure for the board's rank metric; the others are
listed after the ranked rows, each with its reason: the endpoint needs a key or is
disabled, it has no runs or no successful run, too few successful runs, or no such
figure (answers too short to rank on speed).

Rows are duck-typed (leaderboard.Row): endpoint, agg, not_applicable, figure(key),
sort_value(key), rank and unranked_reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from dashboard.definitions import METRICS
from probes.engine.contract import SPEED_METRICS


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
    ok, needed = row.agg.ok_runs, min_ok_runs()
    if not ok:
        return "No successful run in this window."
    if ok < needed:
        return f"Too few runs: {ok} successful in this window, {needed} needed to rank."
    if row.figure(metric) is None:
        if metric in SPEED_METRICS:
            return "Answers too short to rank on speed."
        return f"No {METRICS[metric].label.lower()} measured in this window."
    return ""


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
