"""Factories for the read side: a small catalog with a simulated provider, runs over the
last days, and rollups built by the real rollup code (dashboard/rollups.py); and the demo
of simulated providers measured for real, for the README's screenshots."""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from django.utils.text import slugify

from dashboard import rollups
from dashboard.queries import aggregates
from probes import prompts
from probes.catalog.loader import LoadReport, load_demo, load_workloads
from probes.catalog.seeds import DEMO_PROVIDERS, DemoSeed
from probes.catalog.workload_suite import WORKLOADS
from probes.engine import Limits, Prices, ProbeRequest, RunResult, measure
from probes.kinds import requests as kind_requests
from probes.models import (
    CanonicalModel,
    Claim,
    Endpoint,
    Price,
    Probe,
    ProbeRun,
    Provider,
    Workload,
)
from probes.recording import recorder
from probes.recording.recorder import RunContext
from probes.simulator import BUILTIN, REALISTIC_FAULTS, SimulatorProcess, start_in_process
from tests.counted_runs import run_slot_counted

# live_server + Playwright's sync API share one thread: Django's async-safety check
# would refuse the ORM calls pytest-django makes there (known interaction).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(autouse=True)
def fresh_rollup_memo():
    """Each test reads rollups afresh: ids and data differ from test to test."""
    aggregates.clear_memo()
    yield
    aggregates.clear_memo()


def make_provider(name: str, *, simulated: bool = False, **kw) -> Provider:
    return Provider.objects.create(
        name=name,
        slug=slugify(name),
        base_url=f"https://{name.lower().replace(' ', '')}.example/v1",
        simulated=simulated,
        enabled=True,
        requires_key=not simulated,
        **kw,
    )


def make_model(name: str) -> CanonicalModel:
    return CanonicalModel.objects.create(name=name, slug=slugify(name))


def make_endpoint(
    provider: Provider,
    model: CanonicalModel,
    model_id: str,
    price=(Decimal("0.60"), Decimal("1.20")),
) -> Endpoint:
    endpoint = Endpoint.objects.create(provider=provider, canonical_model=model, model_id=model_id)
    if price:
        Price.objects.create(
            endpoint=endpoint,
            effective_from=date.today() - timedelta(days=30),
            input_per_m=price[0],
            output_per_m=price[1],
        )
    return endpoint


def make_workload(slug: str = "chat-short", name: str = "Short chat") -> Workload:
    return Workload.objects.create(
        slug=slug, name=name, messages=[{"role": "user", "content": "Hi"}], max_tokens=300
    )


def make_timeline(events: int = 160, reasoning: int = 50, seed: int = 7) -> dict:
    """A stream as the engine stores it: role chunk, reasoning events, a pause, answer
    events in small batches with jitter and one stall, then the completion marker."""
    rng = random.Random(seed)
    t = 180_000 + rng.randint(0, 40_000)  # µs to the first output event
    times, channels, tokens = [40_000], "o", [0]  # role-only chunk first: not output
    for i in range(events):
        if i == reasoning:
            t += 35_000  # thinking ends, the answer starts
        elif i == events * 3 // 4:
            t += 60_000  # a stall
        else:
            t += rng.randint(1_200, 3_800)
        times.append(t)
        channels += "r" if i < reasoning else "a"
        tokens.append(rng.choice([1, 2, 2, 3, 4]))
    times.append(t + 800)
    return {"t_us": times, "ch": channels + "d", "tok": [*tokens, 0]}


def make_run(
    endpoint: Endpoint,
    workload: Workload,
    *,
    ago: timedelta,
    status: str = "ok",
    region: str = "eu-west",
    output_tps: float | None = 500.0,
    ttft_ms: float | None = 200.0,
    e2e_ms: float | None = 1200.0,
    short_output: bool = False,
    **kw,
) -> ProbeRun:
    ok = status == "ok"
    return ProbeRun.objects.create(
        endpoint=endpoint,
        workload=workload,
        region=region,
        started_at=timezone.now() - ago,
        status=status,
        http_status=200 if ok else 503,
        error="" if ok else "Service unavailable",
        ttft_ms=ttft_ms if ok else None,
        ttfat_ms=(ttft_ms + 50) if ok and ttft_ms else None,
        e2e_ms=e2e_ms if ok else None,
        output_tps=output_tps if ok else None,
        output_tokens=300 if ok else None,
        token_source="usage" if ok else "",
        short_output=short_output,
        methodology_version="1",
        **kw,
    )


def make_batches(endpoint: Endpoint, workload: Workload, speeds: tuple[float, ...], n: int = 3):
    """`n` parallel run groups of `workload` (kind parallel, requests = len(speeds) - 1):
    each its lone baseline at speeds[0], its batch at the others, and a summary row with
    the batch's aggregate rate (0.9 × their sum), as the parallel kind records them."""
    alone, *batch = speeds
    for _ in range(n):
        group = uuid.uuid4()
        for index, speed in enumerate(speeds):
            make_run(
                endpoint, workload, ago=timedelta(minutes=5), output_tps=speed, role="step",
                run_group=group, request_index=index,
            )  # fmt: skip
        make_run(
            endpoint, workload, ago=timedelta(minutes=5), output_tps=sum(batch) * 0.9,
            role="group", run_group=group, request_index=len(speeds), slowdown=alone / min(batch),
        )  # fmt: skip


@pytest.fixture
def workload(db) -> Workload:
    return make_workload()


@pytest.fixture
def catalog(db, workload):
    """Three providers (one simulated) serving two models, with prices, probes and a claim."""
    llama = make_model("Llama 3.3 70B")
    oss = make_model("GPT OSS 120B")
    fast = make_provider("Cerebras")
    mid = make_provider("Groq")
    sim = make_provider("Demo Sim", simulated=True)
    endpoints = {
        "fast": make_endpoint(fast, llama, "llama-3.3-70b", (Decimal("0.85"), Decimal("1.20"))),
        "mid": make_endpoint(
            mid, llama, "llama-3.3-70b-versatile", (Decimal("0.59"), Decimal("0.79"))
        ),
        "sim": make_endpoint(sim, llama, "sim-fast", None),
        "oss": make_endpoint(mid, oss, "openai/gpt-oss-120b", (Decimal("0.15"), Decimal("0.75"))),
    }
    for e in endpoints.values():
        Probe.objects.create(endpoint=e, workload=workload, region="eu-west")
    Claim.objects.create(
        endpoint=endpoints["fast"],
        metric="output_tps",
        value=2100,
        source_title="Cerebras press release",
        published_on=date(2025, 1, 1),
    )
    return {"models": {"llama": llama, "oss": oss}, "endpoints": endpoints, "workload": workload}


# The newest run of each endpoint carries every field, as a real probe stores them.
FULL_RUN = {
    "timeline": make_timeline(),
    "connect_ms": 38.5,
    "ttfb_ms": 95.2,
    "output_tokens_o200k": 372,
    "output_tps_o200k": 1790.4,
    "e2e_tps": 802.1,
    "itl_ms_p50": 2.4,
    "itl_ms_p95": 3.6,
    "itl_ms_p99": 35.0,
    "itl_ms_max": 60.1,
    "tpot_ms": 1.3,
    "output_events": 160,
    "tokens_per_event": 2.4,
    "reasoning_tokens": 124,
    "input_tokens": 58,
    "cached_input_tokens": 0,
    "finish_reason": "stop",
    "price_input_per_m": Decimal("0.85"),
    "price_output_per_m": Decimal("1.20"),
    "server_queue_ms": 4.1,
    "server_prefill_ms": 21.7,
    "server_decode_ms": 190.2,
    "server_total_ms": 216.0,
    "server_output_tps": 2021.0,
    "usage": {"prompt_tokens": 58, "completion_tokens": 384, "total_tokens": 442},
    "server_timing": {"queue_time": 0.0041, "prompt_time": 0.0217, "completion_time": 0.1902},
}

SPEEDS = {"fast": 1870.0, "mid": 310.0, "sim": 900.0, "oss": 450.0}
TTFTS = {"fast": 240.0, "mid": 120.0, "sim": 60.0, "oss": 300.0}


@pytest.fixture
def history(catalog):
    """A run per endpoint every hour over the last 4 days with realistic noise (one in
    twelve fails), and rollups rebuilt from them the way the scheduler does."""
    return build_history(catalog, timezone.now())


def build_history(catalog: dict, now: datetime) -> dict:
    """`history`'s runs and rollups, the newest ten minutes before `now` (a pinned clock's
    instant, for a test that must not depend on the hour it runs)."""
    rng = random.Random(42)
    workload = catalog["workload"]
    runs = []
    for key, endpoint in catalog["endpoints"].items():
        for i in range(96):
            failed = i % 12 == 5
            speed = SPEEDS[key] * rng.gauss(1, 0.06)
            ttft = TTFTS[key] * rng.lognormvariate(0, 0.25)
            runs.append(
                ProbeRun(
                    endpoint=endpoint,
                    workload=workload,
                    region="eu-west",
                    started_at=now - timedelta(hours=i, minutes=10),
                    status="server_error" if failed else "ok",
                    http_status=503 if failed else 200,
                    error="Service unavailable" if failed else "",
                    ttft_ms=None if failed else ttft,
                    ttfat_ms=None if failed else ttft + 120,
                    e2e_ms=None if failed else ttft + 300_000 / speed,
                    output_tps=None if failed else speed,
                    output_tokens=None if failed else 300,
                    token_source="" if failed else "usage",
                    cost_usd=None if failed else Decimal("0.00031"),
                    methodology_version="1",
                    **(FULL_RUN if i == 0 and not failed else {}),
                )
            )
    runs = ProbeRun.objects.bulk_create(runs)
    rollups.rebuild()
    return {**catalog, "runs": runs}


# -- the demo, measured: what the README's screenshots show ------------------------------

DEMO_REGION = "eu-west"
DEMO_WORKLOAD = "standard-1k"  # the headline workload, the leaderboard's default
DEMO_MAX_TOKENS = 500  # shorter than the workload's, so the GPU profile runs ~4.5 s
DEMO_REAL_RUNS = 2  # per demo provider; the GPU profile takes ~4.5 s a run
DEMO_HISTORY_HOURS = 71  # inside the leaderboard's default 72 h window
DEMO_WORKER = "readme-demo"


@dataclass
class DemoMeasurements:
    """Real runs of the engine against the simulator, taken once per test session."""

    runs: dict[str, list[RunResult]]  # per demo profile, in the order measured
    faults: dict[str, RunResult]  # per realistic fault, one failed run of the flaky profile


def list_prices(seed: DemoSeed) -> Prices:
    """The demo's list price, as the runner passes it from the catalog."""
    return Prices(input_per_m=float(seed.input_per_m), output_per_m=float(seed.output_per_m))


@pytest.fixture(scope="session")
def demo_measurements() -> DemoMeasurements:
    """Each demo profile measured DEMO_REAL_RUNS times (providers side by side, each in
    turn), plus one run of each fault the flaky profile draws from."""
    spec = next(w for w in WORKLOADS if w.slug == DEMO_WORKLOAD)
    messages = prompts.build(kind_requests.prompt_spec(spec), seed=1)
    profiles = [seed.profile for seed in DEMO_PROVIDERS]
    fault_models = [f"sim-flaky@fault={fault},errors=0" for fault in REALISTIC_FAULTS]

    async def in_turn(base_url: str, models: list[str], prices: Prices) -> list[RunResult]:
        limits = Limits(first_token_s=5, stall_s=1, total_s=30)
        return [
            await measure(
                ProbeRequest(
                    api="openai-chat",
                    base_url=base_url,
                    model=model,
                    messages=messages,
                    max_tokens=DEMO_MAX_TOKENS,
                    limits=limits,
                    prices=prices,
                )
            )
            for model in models
        ]

    async def everything(base_url: str) -> list[list[RunResult]]:
        jobs = [
            in_turn(base_url, [seed.profile] * DEMO_REAL_RUNS, list_prices(seed))
            for seed in DEMO_PROVIDERS
        ]
        flaky = next(seed for seed in DEMO_PROVIDERS if seed.profile == "sim-flaky")
        return await asyncio.gather(*jobs, in_turn(base_url, fault_models, list_prices(flaky)))

    # The simulator in its own process, so it keeps its schedule whatever this one does;
    # the client on a thread of its own, as Playwright's sync API may own this one's loop.
    with start_in_process() as sim, ThreadPoolExecutor(1) as thread:
        *runs, faults = thread.submit(asyncio.run, everything(sim.base_url)).result()
    return DemoMeasurements(
        dict(zip(profiles, runs, strict=True)), dict(zip(REALISTIC_FAULTS, faults, strict=True))
    )


def replayed(fields: dict, rng: random.Random) -> dict:
    """A measured run's fields with seeded noise on its latency and speed."""
    fields = {**fields, "timeline": None}
    if fields["status"] != "ok":
        return fields
    latency, speed = rng.lognormvariate(0, 0.12), rng.gauss(1, 0.03)
    streaming_ms = fields["e2e_ms"] - fields["ttft_ms"]
    for name in ("ttfb_ms", "ttft_ms", "ttfat_ms"):
        if fields[name] is not None:
            fields[name] *= latency
    for name in ("output_tps", "output_tps_o200k"):
        if fields[name] is not None:
            fields[name] *= speed
    fields["e2e_ms"] = fields["ttft_ms"] + streaming_ms / speed
    return fields


@pytest.fixture
def demo(db, demo_measurements: DemoMeasurements) -> dict:
    """The demo catalog with history, for the README screenshots.

    The newest runs of each simulated provider are real measurements recorded through
    probes/recording/recorder.py. Behind them, an hourly history over three days replays those
    measurements with seeded noise, failing as often and as variously as the flaky
    profile does (each failure a real run of that fault), so the charts have a history.
    """
    load_demo(DEMO_REGION, "http://127.0.0.1:8099")
    workload = Workload.objects.get(slug=DEMO_WORKLOAD)
    rng = random.Random(2100)
    now = timezone.now()
    real, history = {}, []
    for seed in DEMO_PROVIDERS:
        probe = Probe.objects.get(
            endpoint__provider__slug=seed.slug, workload=workload, region=DEMO_REGION
        )
        ctx = RunContext(
            endpoint_id=probe.endpoint_id,
            workload_id=workload.pk,
            region=DEMO_REGION,
            worker=DEMO_WORKER,
            probe_id=probe.pk,
            price=probe.endpoint.current_price,
        )
        measured = demo_measurements.runs[seed.profile]
        for result in measured:
            assert recorder.record(result, ctx) == "written"
        real[seed.profile] = ProbeRun.objects.filter(probe=probe).latest("started_at")
        ok = [r for r in measured if r.status == "ok"] or [demo_measurements.faults["stall"]]
        profile, draws = BUILTIN[seed.profile], random.Random(BUILTIN[seed.profile].seed)
        for hour in range(1, DEMO_HISTORY_HOURS + 1):
            fault = profile.for_request(draws).fault
            result = ok[hour % len(ok)] if fault == "none" else demo_measurements.faults[fault]
            fields = replayed(recorder.run_fields(result, ctx), rng)
            fields["started_at"] = now - timedelta(hours=hour, minutes=rng.randint(0, 50))
            history.append(ProbeRun(**fields))
    ProbeRun.objects.bulk_create(history)
    rollups.rebuild()
    return {"workload": workload, "real_runs": real}


# -- the workload suite, measured through the runner ----------------------------------

# Small versions of the group workloads: the shapes are what is tested, not the sizes.
SMALL = {
    "cached-10k": {"approx_input_tokens": 2000, "max_tokens": 60},
    "agent-loop": {"requests": 3, "max_tokens": 40, "target_output_tokens": 40},
    "parallel-8": {"requests": 2, "max_tokens": 60, "target_output_tokens": 60},
    "standard-1k": {"max_tokens": 120, "target_output_tokens": 100},
    "code-refactor": {"max_tokens": 120, "target_output_tokens": 100},
    "long-10k": {"approx_input_tokens": 2000, "max_tokens": 60, "target_output_tokens": 50},
    "chat-short": {"max_tokens": 60, "target_output_tokens": 50},
}
SHOWN = ["cached-10k", "agent-loop", "parallel-8", "json-schema", "tool-call", "voice-turn"]


@pytest.fixture(scope="module")
def workload_sim() -> Iterator[SimulatorProcess]:
    with start_in_process() as handle:
        yield handle


@pytest.fixture
def measured(db, workload_sim) -> dict[str, Probe]:
    """Each workload of the suite measured once through the runner, as scheduled."""
    load_workloads(LoadReport())
    for slug, changes in SMALL.items():
        Workload.objects.filter(slug=slug).update(**changes)
    provider = Provider.objects.create(
        name="Wafer",
        slug="wafer",
        base_url=workload_sim.base_url,
        requires_key=False,
        enabled=True,
        simulated=True,
        max_concurrency=4,
    )
    model = CanonicalModel.objects.create(name="Llama 3.3 70B", slug="llama-3-3-70b")
    endpoint = Endpoint.objects.create(
        provider=provider, model_id="sim-blazing", canonical_model=model
    )
    probes = {}
    slot = datetime.now(UTC).replace(microsecond=0)
    for slug in [*SHOWN, "standard-1k", "code-refactor", "long-10k", "chat-short"]:
        probe = Probe.objects.create(
            endpoint=endpoint, workload=Workload.objects.get(slug=slug), region="local"
        )
        run_slot_counted(probe, slot)
        probes[slug] = probe
    return probes
