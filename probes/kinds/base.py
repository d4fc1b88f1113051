"""The interface every workload kind implements, and the values the kinds pass on.

A kind answers, for a workload of its kind: what it sends (``requests``: measured through
the callables of a Plan, so the kind never knows whether a slot, ``measure`` or a test
measures it), how big its group is and what it holds under a cap (``size``,
``footprint``: the runner takes and the planner plans the same figures), what its
group's summary says (``summarize``) and which leaderboard columns are its own
(``headline``, ``rank_metric``). Kinds take Workload rows and suite seeds alike (duck
typed): nothing here imports Django or the models, so the models and the scheduler can
read the registry.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from probes import prompts
from probes.engine.request import ProbeRequest
from probes.engine.result import RunResult
from probes.kinds import checks
from probes.kinds.requests import prompt_spec, request_extras


@dataclass
class Measured:
    """One measured request (or a group's summary) and what the workload judged of it."""

    index: int
    role: str  # "single", "step" or "group"
    result: RunResult
    seed: int | None = None
    prompt_tokens_o200k: int | None = None
    output_valid: bool | None = None
    check_detail: str = ""
    stopped_short: bool = False
    group_summary: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """What ``measure --json`` prints for this request (or the group)."""
        out = self.result.to_dict(include_text=False)
        out.update(
            request_index=self.index,
            role=self.role,
            prompt_seed=self.seed,
            prompt_tokens_o200k=self.prompt_tokens_o200k,
            output_valid=self.output_valid,
            check_detail=self.check_detail or None,
            stopped_short=self.stopped_short,
        )
        if self.role == "group":
            out["group"] = True
            out["group_summary"] = self.group_summary
        return out


@dataclass
class Plan:
    """How to send one workload's requests to one endpoint.

    ``template`` is a complete request but for its messages: each request replaces them
    and adds the fields its answer check needs (the template's own body fields and
    headers, the operator's, win)."""

    workload: Any  # a probes.models.Workload (or a workload_suite.WorkloadSeed)
    template: ProbeRequest
    seed_of: Callable[[int], int]  # request index -> prompt seed
    measure_one: Callable[[ProbeRequest], RunResult]
    measure_many: Callable[[list[ProbeRequest]], list[RunResult]]
    cap: int | None = None  # requests at once the endpoint takes: a sweep stops there
    # Each request as it is measured: what the caller keeps if the group is cut short.
    measured: list[Measured] = field(default_factory=list)

    def keep(self, m: Measured) -> Measured:
        self.measured.append(m)
        return m


@dataclass(frozen=True)
class Footprint:
    """What one run of a workload holds: ``width`` streams at once (its widest step)
    for ``rounds`` requests in turn. The runner takes these caps; the planner's
    expected busy seconds are ``rounds`` × one request's time."""

    width: int
    rounds: int


class Kind:
    """One workload kind. Subclasses set the names and override what differs."""

    name = ""
    title = ""  # the admin's choice label
    group = True  # its requests form a run group ranked by a summary row
    feeds_answers = False  # each request is fed the previous answer (needs its text)
    curve = False  # its summary is a curve of steps (``measure`` prints them)
    streams = False  # a concurrent batch: the pages show its per-stream speed
    headline: frozenset[str] = frozenset()  # leaderboard columns of its own
    rank_metric: str | None = None  # what its board ranks by, when the kind decides

    # -- the shape -------------------------------------------------------------------

    def validate(self, workload: Any) -> dict[str, str]:
        """Field errors of a workload row of this kind (empty: valid)."""
        return {}

    def size(self, workload: Any) -> int:
        """Requests a full group holds (its summary takes the next index)."""
        return workload.requests

    def footprint(self, workload: Any, cap: int | None = None) -> Footprint:
        """Streams held and requests in turn under a provider's ``cap``."""
        return Footprint(1, workload.requests)

    def expected(self, workload: Any, cap: int | None = None) -> int:
        """Requests a complete group has measured (fewer: it stopped early)."""
        return self.size(workload)

    def request_label(self, index: int) -> str:
        """What request ``index`` is within its group, on the run page."""
        return f"step {index + 1}"

    def needs_text(self, workload: Any) -> bool:
        """Whether the answer text must come back from the engine (checked or fed on)."""
        return self.feeds_answers or checks.needs_text_to_check(workload)

    # -- the requests and the summary -------------------------------------------------

    def requests(self, plan: Plan) -> list[Measured]:
        """Measure the group's requests (unjudged), stopping where the kind must; each
        is kept in ``plan.measured`` as soon as it is measured, the list returned."""
        raise NotImplementedError

    def summarize(
        self, group: RunResult, members: list[Measured], workload: Any, cap: int | None
    ) -> dict[str, Any]:
        """Set the group row's ranking figures from its members; return the details."""
        raise NotImplementedError

    # -- shared by the kinds ----------------------------------------------------------

    def request(
        self, plan: Plan, messages: list[dict[str, Any]], fresh_tokens: int | None
    ) -> ProbeRequest:
        """``fresh_tokens``: our count of a prompt the provider cannot have cached (for
        the prefill rate when usage has none); None for a repeated or extended prompt."""
        body, headers = request_extras(plan.workload, plan.template.api)
        base = plan.template
        req = dataclasses.replace(
            base,
            messages=messages,
            extra_body={**body, **base.extra_body},
            extra_headers={**headers, **base.extra_headers},
            include_text=base.include_text or self.needs_text(plan.workload),
        )
        req.prompt_tokens = fresh_tokens
        return req

    def one(self, plan: Plan, index: int, seed: int, role: str, *, repeat=False) -> Measured:
        """Request ``index`` with a fresh prompt from ``seed`` (``repeat``: sent before)."""
        messages = prompts.build(prompt_spec(plan.workload), seed)
        size = prompts.input_size(messages)
        result = plan.measure_one(self.request(plan, messages, None if repeat else size))
        return plan.keep(Measured(index, role, result, seed, size))

    def batch(self, plan: Plan, indexes: range) -> list[Measured]:
        """Requests ``indexes`` at once, each with its own fresh prompt."""
        spec = prompt_spec(plan.workload)
        seeds = [plan.seed_of(i) for i in indexes]
        batch = [prompts.build(spec, seed) for seed in seeds]
        sizes = [prompts.input_size(messages) for messages in batch]
        results = plan.measure_many(
            [self.request(plan, m, size) for m, size in zip(batch, sizes, strict=True)]
        )
        return [
            plan.keep(Measured(i, "step", result, seed, size))
            for i, seed, size, result in zip(indexes, seeds, sizes, results, strict=True)
        ]


def stop(result: RunResult) -> bool:
    """After this, a group goes no further: the provider asked us to wait."""
    return result.status == "rate_limited"


def total(values: list[Any]) -> Any:
    known = [v for v in values if v is not None]
    return round(sum(known), 10) if known else None


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


def pct(part: float | None, whole: float | None) -> float | None:
    if part is None or not whole:
        return None
    return round(100.0 * part / whole, 1)
