"""The registry of workload kinds: one module per kind behind one interface (base.Kind).

single, cached, loop, parallel and sweep each answer what they send, their group's size
and footprint under a cap, their group's summary and their headline columns. The
runner (probes/slots/), the planner (probes/scheduling/), the admin's choices, the
Workload model, the pages and the API all read a workload's kind from here: no module
outside this package compares a kind to a literal (tests/test_kinds_registry.py).
Adding a kind: a module here with its Kind subclass and KIND, and one line below.

Also here, below the kinds: requests.py (a workload's request fields and seeds) and
checks.py (answer checks, which cut across the kinds); headline.py (a workload's
leaderboard columns). Nothing here imports Django or probes.models.
"""

from __future__ import annotations

from typing import Any

from probes.kinds import cached, loop, parallel, single, sweep
from probes.kinds.base import Footprint, Kind, Measured, Plan

KINDS: dict[str, Kind] = {
    k.name: k for k in (single.KIND, cached.KIND, loop.KIND, parallel.KIND, sweep.KIND)
}
# The Workload.kind choices (the admin's select, model validation).
CHOICES: list[tuple[str, str]] = [(k.name, k.title) for k in KINDS.values()]


def get(name: str) -> Kind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown workload kind {name!r}; expected one of {list(KINDS)}") from None


def of(workload: Any) -> Kind:
    """The kind of a Workload row or a suite seed."""
    return get(workload.kind)


def footprint(workload: Any, cap: int | None = None) -> Footprint:
    """Streams held and requests in turn by one run under a provider's ``cap``: what the
    slot takes (probes/slots/plan.py) and what the planner plans for."""
    return of(workload).footprint(workload, cap)


def names(flag: str) -> list[str]:
    """The kinds with a true ``flag`` (e.g. "curve"): for database filters."""
    return [k.name for k in KINDS.values() if getattr(k, flag)]


def needs_text(workload: Any) -> bool:
    """Whether a workload's answers must come back as text (checked or fed on)."""
    return of(workload).needs_text(workload)


__all__ = [
    "CHOICES",
    "KINDS",
    "Footprint",
    "Kind",
    "Measured",
    "Plan",
    "footprint",
    "get",
    "names",
    "needs_text",
    "of",
]
