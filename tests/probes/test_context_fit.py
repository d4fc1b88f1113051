"""What a workload needs of a context window: its largest request, in Python and in SQL.

The agent loop's last step carries every earlier answer: the formula is checked against
the requests the loop really builds, the SQL against the Python on a grid of cases (real
Postgres), and both against a simulated server reporting its context as llama.cpp does.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from probes import kinds, prompts
from probes.catalog import workload_suite
from probes.catalog.loader import LoadReport, load_workloads
from probes.engine import ProbeRequest, RunResult, tokens
from probes.models import CanonicalModel, Endpoint, Probe, ProbeRun, Provider, Workload, context_fit
from probes.onboarding import connection_check, new_endpoint
from probes.simulator import ServerTraits, start_in_thread
from probes.slots import run as runner

MODEL = "sim-gpu@tps=3000,ttft=20"


# -- the formula against the requests a loop builds --------------------------------------


def answer_of(n: int, seed: int) -> str:
    """An answer of exactly ``n`` o200k tokens (corpus prose, as a model's plan reads)."""
    sentences = prompts.sentences()
    text = " ".join(sentences[(seed + i) % len(sentences)] for i in range(n))
    return tokens.encoding().decode(tokens.encoding().encode_ordinary(text)[:n])


def chatml_size(messages: list[dict]) -> int:
    """The prompt as a ChatML server counts it (o200k standing in for its tokenizer):
    <|im_start|>role\\ncontent<|im_end|>\\n per message, then <|im_start|>assistant\\n."""
    per_message = sum(2 + tokens.count(f"{m['role']}\n{m['content']}\n") for m in messages)
    return per_message + 2 + tokens.count("assistant\n")


def sent_by_a_loop(workload, seed: int) -> list[list[dict]]:
    """Every request the loop kind sends, each step answered at full length."""
    sent: list[list[dict]] = []

    def measure_one(req: ProbeRequest) -> RunResult:
        sent.append(req.messages)
        text = answer_of(req.max_tokens, seed + len(sent))
        return RunResult(status="ok", text=text, output_tokens=req.max_tokens)

    template = ProbeRequest(
        api="openai-chat", base_url="http://127.0.0.1:9/v1", model="m",
        max_tokens=workload.max_tokens,
    )  # fmt: skip
    plan = kinds.Plan(
        workload=workload,
        template=template,
        seed_of=lambda index: seed,
        measure_one=measure_one,
        measure_many=lambda reqs: [measure_one(r) for r in reqs],
    )
    kinds.of(workload).requests(plan)
    return sent


@pytest.mark.parametrize(
    ("requests", "max_tokens", "seed"), [(10, 300, 1), (10, 300, 2), (3, 1000, 3), (32, 80, 4)]
)
def test_the_loops_largest_request_fits_in_what_the_formula_asks(requests, max_tokens, seed):
    seed_row = workload_suite.get("agent-loop")
    workload = Workload(
        **(seed_row.row_fields() | {"requests": requests, "max_tokens": max_tokens})
    )
    workload.slug = seed_row.slug

    sent = sent_by_a_loop(workload, seed)

    assert len(sent) == requests
    sizes = [chatml_size(messages) for messages in sent]
    assert sizes == sorted(sizes) and len(sent[-1]) == 2 + 2 * (requests - 1)
    largest = sizes[-1] + max_tokens  # its prompt and the answer it may get
    needed = context_fit.tokens_needed(workload)
    assert largest <= needed <= 1.2 * largest
    # What one request needs (the old test) is far short of the loop's last step.
    first = chatml_size(sent[0]) + max_tokens
    assert needed > first + (requests - 1) * max_tokens


def test_other_kinds_need_one_request():
    standard, cached = workload_suite.get("standard-1k"), workload_suite.get("cached-10k")
    parallel = workload_suite.get("parallel-8")
    for workload in (standard, cached, parallel):
        assert context_fit.follow_ups(workload) == 0
    # A cached pair and a parallel batch need what one of their requests does.
    single_like = Workload(kind="single", requests=1, approx_input_tokens=10000, max_tokens=400)
    assert context_fit.tokens_needed(cached) == context_fit.tokens_needed(single_like)
    # The step instruction is counted from the text the loop sends, not assumed.
    step = prompts.follow_up(prompts.PromptSpec("x"), [], "a", 31, 32)[-1]["content"]
    assert tokens.count(step) <= context_fit.step_tokens() <= tokens.count(step) + 5


# -- Python and SQL agree ---------------------------------------------------------------


GROUPS = [("single", 1), ("cached", 2), ("loop", 1), ("loop", 2), ("loop", 10), ("loop", 32)]
GROUPS += [("parallel", 8)]
INPUTS = [None, 100, 600, 9999]
WORKLOAD_MAX = [1, 300, 1301]
PROBE_MAX = [None, 77]


@pytest.mark.django_db
def test_python_and_sql_need_the_same_context_on_a_grid_of_cases():
    provider = Provider.objects.create(
        name="P", slug="p", base_url="http://127.0.0.1:9/v1", requires_key=False, enabled=True
    )
    model = CanonicalModel.objects.create(name="M", slug="m")
    cases = list(itertools.product(GROUPS, INPUTS, WORKLOAD_MAX))
    rows = Workload.objects.bulk_create(
        Workload(
            slug=f"w{i}",
            name=f"w{i}",
            kind=kind,
            requests=requests,
            approx_input_tokens=input_tokens,
            max_tokens=max_tokens,
        )  # fmt: skip
        for i, ((kind, requests), input_tokens, max_tokens) in enumerate(cases)
    )
    probes = []
    for n, (workload, probe_max) in enumerate(itertools.product(rows, PROBE_MAX)):
        needed = context_fit.tokens_needed(workload, probe_max)
        # Half the endpoints one token short: the boundary must fall on the same side.
        endpoint = Endpoint.objects.create(
            provider=provider, model_id=f"m{n}", canonical_model=model,
            context_tokens=needed - (n + n // 2) % 2,
        )  # fmt: skip
        probes.append(Probe(endpoint=endpoint, workload=workload, max_tokens=probe_max))
    Probe.objects.bulk_create(probes)

    in_sql = dict(
        Probe.objects.annotate(needed=context_fit.probe_tokens_needed()).values_list("pk", "needed")
    )
    active = set(Probe.objects.active().values_list("pk", flat=True))
    assert len(in_sql) == len(cases) * len(PROBE_MAX)
    for probe in Probe.objects.select_related("endpoint", "workload"):
        assert in_sql[probe.pk] == context_fit.tokens_needed(probe.workload, probe.max_tokens)
        assert (
            (probe.pk in active)
            == probe.applicable
            == (probe.endpoint.context_tokens >= in_sql[probe.pk])
        )
    assert 0 < len(active) < len(in_sql)
    # The endpoint-side test (the board's not-applicable rows) draws the same line.
    for workload in rows:
        on_it = Probe.objects.filter(workload=workload, max_tokens=None).select_related("endpoint")
        endpoints = Endpoint.objects.filter(probes__in=on_it)
        assert set(endpoints.too_small_for(workload)) == {
            p.endpoint for p in on_it if not p.applicable
        }


# -- a server that reports its context --------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("context", [2048, 8192])
def test_agent_loop_is_proposed_and_runs_only_where_its_last_step_fits(context):
    load_workloads(LoadReport())
    agent_loop = Workload.objects.get(slug="agent-loop")
    with start_in_thread(traits=ServerTraits(context_tokens=context, total_slots=1)) as sim:
        report = connection_check.check(sim.base_url, MODEL)
        assert report.context_tokens == context

        proposed = {p.workload.slug: p for p in new_endpoint.propose(report.context_tokens)}
        fits = context >= 8192
        assert proposed["agent-loop"].fits is fits
        created = new_endpoint.create(
            new_endpoint.NewEndpoint(
                provider_name="Box", api_style=report.api_style, base_url=sim.base_url,
                model_id=MODEL, model_name="Small", context_tokens=report.context_tokens,
                workloads=[agent_loop],
            )
        )  # fmt: skip
        assert bool(created.probes) is fits
        # An operator adding the probe by hand gets one that never runs.
        probe, _ = Probe.objects.get_or_create(
            endpoint=created.endpoint, workload=agent_loop, defaults={"region": "local"}
        )
        assert probe.applicable is fits
        assert (probe in Probe.objects.active()) is fits
        assert (created.endpoint in Endpoint.objects.too_small_for(agent_loop)) is not fits

        # Run anyway: on the small server a late step is refused, as the formula predicted.
        runner.run_slot(probe, datetime(2026, 6, 1, tzinfo=UTC), "w1", "local")
    *steps, group = ProbeRun.objects.filter(probe=probe).order_by("request_index")
    if fits:
        assert group.status == "ok" and len(steps) == agent_loop.requests
        assert all(s.output_tokens == agent_loop.max_tokens for s in steps)
        last = steps[-1]
        assert last.input_tokens + last.output_tokens <= context_fit.tokens_needed(agent_loop)
    else:
        assert steps[-1].http_status == 400 and len(steps) < agent_loop.requests
        assert group.status != "ok"
