"""Fill the database with a realistic synthetic history, for demos and the scale benchmark.

    python manage.py generate_history --runs 10000000 --probes 300 --days 365

With `--slowdowns N`, each endpoint also gets about N transient slowdowns a month (speed
20–50 % lower for 2–8 hours); `--changes-out FILE` writes every injected slowdown (these
and the lasting hardware changes that made an endpoint slower) as JSON, so
`backtest_alerts --injected FILE` can score how many an alert rule catches.

Creates a synthetic catalog (providers named "Synthetic …", flagged simulated and left
disabled so the dispatcher never probes them), then writes one day at a time with
Postgres COPY, each day in its own transaction. Ctrl-C loses at most the day in
progress (rolled back); running the command again resumes after the last whole day.
Every day draws from its own seeded generator, so a resumed history is the same as an
uninterrupted one. Rollups for the generated days are built at the end (and on resume).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils.text import slugify

from dashboard import rollups
from probes.engine.contract import counts_for_speed
from probes.models import CanonicalModel, Endpoint, Price, Probe, ProbeRun, Provider, Workload

SYNTHETIC_PREFIX = "synthetic-"
MODELS_PER_PROVIDER = 4
REGIONS = ("us-east", "eu-west", "ap-south")

# (slug, name, typical output tokens, TTFT factor for the prompt length, input tokens)
WORKLOADS = (
    ("syn-chat-short", "Synthetic short chat", 30, 1.0, 60),
    ("syn-chat-medium", "Synthetic medium answer", 400, 1.1, 200),
    ("syn-long-context", "Synthetic long context", 300, 3.5, 8000),
)

# Failures by kind when a run fails outside an outage (weights).
FAILURES = (
    ("server_error", 40, 500),
    ("rate_limited", 20, 429),
    ("timeout_first_token", 15, None),
    ("stream_error", 10, 200),
    ("network_error", 10, None),
    ("truncated", 5, 200),
)
_FAILURE_KINDS = [f[0] for f in FAILURES]
_FAILURE_WEIGHTS = [f[1] for f in FAILURES]
_FAILURE_HTTP = {f[0]: f[2] for f in FAILURES}

COLUMNS = (
    "probe_id",
    "endpoint_id",
    "workload_id",
    "region",
    "worker",
    "slot_at",
    "run_group",
    "request_index",
    "started_at",
    "status",
    "http_status",
    "error",
    "retry_after_s",
    "connect_ms",
    "cold_connection",
    "ttfb_ms",
    "ttft_ms",
    "ttfat_ms",
    "e2e_ms",
    "output_tokens",
    "token_source",
    "output_tps",
    "e2e_tps",
    "itl_ms_p50",
    "itl_ms_p95",
    "itl_ms_p99",
    "itl_ms_max",
    "tpot_ms",
    "output_events",
    "tokens_per_event",
    "input_tokens",
    "finish_reason",
    "short_output",
    "client_bound",
    "cost_usd",
    "price_input_per_m",
    "price_output_per_m",
    "methodology_version",
    "read_path",
    # Not-null columns without a database default: COPY must name them.
    "role",
    "stopped_short",
    "check_detail",
)


@dataclass(frozen=True)
class EndpointProfile:
    """How one synthetic endpoint behaves all year (drawn once, from its index)."""

    tps: float
    ttft_ms: float
    error_rate: float
    diurnal_amplitude: float
    peak_hour: float
    change_day: int  # the day the provider changed hardware or batching
    change_factor: float
    reasoning: bool
    price_in: float
    price_out: float
    # Transient slowdowns: (start, end) as Unix seconds, and the share of speed lost.
    slowdowns: tuple[tuple[float, float, float], ...] = ()

    def slowdown_at(self, when: float) -> float:
        return next((share for a, b, share in self.slowdowns if a <= when < b), 0.0)

    def with_slowdowns(self, index: int, per_month: float, start: datetime, days: int):
        """The same endpoint with transient slowdowns drawn from their own generator (so
        the rest of the history is the same with or without them)."""
        if per_month <= 0:
            return self
        rng = random.Random(f"slowdowns-{index}")
        begin, end = start.timestamp(), start.timestamp() + days * 86400
        spans, at = [], begin + 2 * 86400  # a baseline's worth first
        while True:
            at += rng.expovariate(per_month / (30 * 86400))
            length = rng.uniform(2, 8) * 3600
            if at + length >= end:
                break
            spans.append((at, at + length, rng.uniform(0.2, 0.5)))
            at += length
        return dataclasses.replace(self, slowdowns=tuple(spans))

    @classmethod
    def draw(cls, index: int, days: int) -> EndpointProfile:
        rng = random.Random(f"endpoint-{index}")
        return cls(
            tps=min(3000.0, max(15.0, rng.lognormvariate(math.log(120), 0.9))),
            ttft_ms=min(5000.0, max(60.0, rng.lognormvariate(math.log(450), 0.6))),
            error_rate=rng.uniform(0.002, 0.03),
            diurnal_amplitude=rng.uniform(0.0, 0.25),
            peak_hour=rng.uniform(13, 21),
            change_day=rng.randrange(max(1, days)),
            change_factor=rng.choice([1.0, 1.0, 0.7, 1.3, 1.6]),
            reasoning=rng.random() < 0.15,
            price_in=round(rng.uniform(0.05, 3.0), 4),
            price_out=round(rng.uniform(0.1, 12.0), 4),
        )


@dataclass(frozen=True)
class ProbePlan:
    probe_id: int
    endpoint_id: int
    workload_id: int
    region: str
    provider_index: int
    profile: EndpointProfile
    workload: tuple
    phase_s: float
    region_rtt_ms: float


class Command(BaseCommand):
    help = "Generate a realistic synthetic probe history (resumable; Ctrl-C is safe)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--runs", type=int, default=10_000_000, help="Total runs wanted.")
        parser.add_argument("--probes", type=int, default=300, help="Synthetic probes.")
        parser.add_argument("--days", type=int, default=365, help="Days of history.")
        parser.add_argument(
            "--end",
            type=date.fromisoformat,
            default=None,
            help="Last day generated is the day before this (default: today, UTC).",
        )
        parser.add_argument("--no-rollups", action="store_true", help="Skip building rollups.")
        parser.add_argument(
            "--slowdowns",
            type=float,
            default=0.0,
            help="Transient slowdowns per endpoint per 30 days (20–50 %% slower, 2–8 h).",
        )
        parser.add_argument(
            "--changes-out",
            type=Path,
            default=None,
            help="Write the injected slowdowns here as JSON (for backtest_alerts --injected).",
        )

    def handle(self, *args, **options) -> None:
        runs, probes, days = options["runs"], options["probes"], options["days"]
        if runs < 1 or probes < 1 or days < 1:
            raise CommandError("--runs, --probes and --days must be positive.")
        interval_s = days * 86400 * probes / runs
        if interval_s < 10:
            raise CommandError(
                f"{runs} runs from {probes} probes in {days} days means one run every "
                f"{interval_s:.1f} s per probe; the shortest probe interval is 10 s."
            )
        end_day = options["end"] or datetime.now(UTC).date()
        end = datetime(end_day.year, end_day.month, end_day.day, tzinfo=UTC)
        start = end - timedelta(days=days)

        plans = self._catalog(probes, interval_s, days, start, options["slowdowns"])
        if options["changes_out"]:
            self._write_changes(options["changes_out"], plans, start, days)
        resume_from = self._resume_point(plans, start)
        total_days = (end - start).days
        done_days = (resume_from - start).days
        if done_days:
            self.stdout.write(f"Resuming: {done_days} of {total_days} days already written.")
        self.stdout.write(
            f"Generating {probes} probes × one run every {interval_s:.0f} s × "
            f"{total_days} days ≈ {runs:,} runs, from {start:%Y-%m-%d} to {end:%Y-%m-%d}."
        )

        began = time.monotonic()
        written = 0
        day = resume_from
        if day >= end:
            self.stdout.write("Nothing to generate: the history is complete.")
            return
        try:
            while day < end:
                with transaction.atomic():
                    written += self._write_day(plans, day, start, interval_s)
                day += timedelta(days=1)
                done_days += 1
                rate = written / max(time.monotonic() - began, 1e-6)
                remaining = (total_days - done_days) * (written / max(1, done_days)) / rate
                self.stdout.write(
                    f"  {day:%Y-%m-%d}  day {done_days}/{total_days}  "
                    f"{written:,} runs  {rate:,.0f} runs/s  ~{remaining / 60:.0f} min left",
                )
        except KeyboardInterrupt:
            self.stdout.write(
                f"Interrupted: {day:%Y-%m-%d} rolled back, earlier days kept. "
                "Run the command again to resume."
            )
            return
        if not options["no_rollups"]:
            self.stdout.write("Building rollups (hourly and daily) …")
            # Only the days written now: earlier ones got theirs when they were written.
            # (After an interruption during this step, run `rebuild_rollups`.)
            rollups.rebuild(resume_from, end, progress=lambda msg: self.stdout.write("  " + msg))
            # The rebuild covered every run just written: the minute maintenance need not
            # read millions of them again to find the buckets they landed in.
            rollups.mark_runs_read()
        self.stdout.write(self.style.SUCCESS(f"Done: {written:,} runs written."))

    # -- catalog ---------------------------------------------------------------------------

    def _write_changes(self, path: Path, plans: list[ProbePlan], start: datetime, days: int):
        """Every injected slowdown, once per endpoint (its probes all share it)."""
        changes, seen = [], set()
        for plan in plans:
            if plan.endpoint_id in seen:
                continue
            seen.add(plan.endpoint_id)
            profile = plan.profile
            for a, b, share in profile.slowdowns:
                changes.append(
                    {
                        "endpoint": plan.endpoint_id,
                        "start": datetime.fromtimestamp(a, UTC).isoformat(),
                        "end": datetime.fromtimestamp(b, UTC).isoformat(),
                        "slower_by": round(share, 4),
                        "kind": "transient",
                    }
                )
            if profile.change_factor < 1.0 and profile.change_day < days:
                changes.append(
                    {
                        "endpoint": plan.endpoint_id,
                        "start": (start + timedelta(days=profile.change_day)).isoformat(),
                        "end": None,  # lasting: the baseline catches up after a day
                        "slower_by": round(1 - profile.change_factor, 4),
                        "kind": "lasting",
                    }
                )
        path.write_text(json.dumps({"changes": changes}, indent=1))
        self.stdout.write(f"Wrote {len(changes)} injected slowdowns to {path}.")

    def _catalog(
        self, probes: int, interval_s: float, days: int, start: datetime, slowdowns: float
    ) -> list[ProbePlan]:
        """Get or create the synthetic providers, endpoints, workloads and probes."""
        workloads = []
        for slug, name, out_tokens, _ttft, in_tokens in WORKLOADS:
            workload, _ = Workload.objects.get_or_create(
                slug=slug,
                defaults={
                    "name": name,
                    "messages": [{"role": "user", "content": f"({name})"}],
                    "max_tokens": out_tokens * 2,
                    "approx_input_tokens": in_tokens,
                },
            )
            workloads.append(workload)
        targets = [(e, w, r) for r in REGIONS for e in range(10_000) for w in range(3)]
        plans = []
        for n, (ep_index, wl_index, region) in enumerate(targets[:probes]):
            endpoint = self._endpoint(ep_index)
            profile = EndpointProfile.draw(ep_index, days).with_slowdowns(
                ep_index, slowdowns, start, days
            )
            probe, _ = Probe.objects.get_or_create(
                endpoint=endpoint,
                workload=workloads[wl_index],
                region=region,
                defaults={"interval_s": max(10, round(interval_s)), "jitter_s": 5},
            )
            plans.append(
                ProbePlan(
                    probe_id=probe.pk,
                    endpoint_id=endpoint.pk,
                    workload_id=probe.workload_id,
                    region=region,
                    provider_index=ep_index // MODELS_PER_PROVIDER,
                    profile=profile,
                    workload=WORKLOADS[wl_index],
                    phase_s=(n * interval_s / probes) % interval_s,
                    region_rtt_ms={"us-east": 15.0, "eu-west": 60.0, "ap-south": 140.0}[region],
                )
            )
        return plans

    def _endpoint(self, index: int) -> Endpoint:
        provider_index, model_index = divmod(index, MODELS_PER_PROVIDER)
        name = f"Synthetic Provider {provider_index + 1:02d}"
        provider, _ = Provider.objects.get_or_create(
            slug=f"{SYNTHETIC_PREFIX}{provider_index + 1:02d}",
            defaults={
                "name": name,
                "base_url": "http://127.0.0.1:9/v1",
                "requires_key": False,
                "simulated": True,
                "enabled": False,  # history only: the dispatcher must never probe these
            },
        )
        model_name = f"Synthetic Model {model_index + 1} ({provider_index % 7 + 1})"
        canonical, _ = CanonicalModel.objects.get_or_create(
            slug=slugify(model_name), defaults={"name": model_name}
        )
        endpoint, created = Endpoint.objects.get_or_create(
            provider=provider,
            model_id=f"syn-model-{model_index + 1}",
            defaults={"canonical_model": canonical},
        )
        if created:
            profile = EndpointProfile.draw(index, 1)
            Price.objects.create(
                endpoint=endpoint,
                effective_from=date(2000, 1, 1),
                input_per_m=Decimal(str(profile.price_in)),
                output_per_m=Decimal(str(profile.price_out)),
            )
        return endpoint

    def _resume_point(self, plans: list[ProbePlan], start: datetime) -> datetime:
        last = (
            ProbeRun.objects.filter(probe_id__in=[p.probe_id for p in plans])
            .order_by("-started_at")
            .values_list("slot_at", flat=True)
            .first()
        )
        if last is None or last < start:
            return start
        # Days are written whole, in order: the day holding the last slot is complete.
        day = datetime(last.year, last.month, last.day, tzinfo=UTC)
        return day + timedelta(days=1)

    # -- runs ------------------------------------------------------------------------------

    def _write_day(
        self, plans: list[ProbePlan], day: datetime, start: datetime, interval_s: float
    ) -> int:
        day_index = (day - start).days
        rng = random.Random(f"day-{day:%Y-%m-%d}")
        day_start = day.timestamp()
        # Our own downtime (deploys, a worker host lost): nobody measured, so no rows.
        gaps = []
        if rng.random() < 0.03:
            gap_start = day_start + rng.uniform(0, 80000)
            gaps.append((gap_start, gap_start + rng.uniform(1800, 6 * 3600)))
        # Provider outages: every probe of that provider fails for a while.
        outages: dict[int, tuple[float, float]] = {}
        for provider_index in {p.provider_index for p in plans}:
            if rng.random() < 0.01:
                begin = day_start + rng.uniform(0, 80000)
                outages[provider_index] = (begin, begin + rng.uniform(900, 4 * 3600))

        columns = ", ".join(COLUMNS)
        count = 0
        with connection.cursor() as cursor:
            sql = f"COPY probes_proberun ({columns}) FROM STDIN"
            with cursor.copy(sql) as copy:
                for plan in plans:
                    # Slot k of a probe is k × interval + phase: computed, never
                    # accumulated, so float drift cannot put one slot in two days.
                    k = math.ceil((day_start - plan.phase_s) / interval_s)
                    while (slot := k * interval_s + plan.phase_s) < day_start + 86400:
                        if not any(a <= slot < b for a, b in gaps):
                            copy.write_row(self._run(plan, slot, day_index, rng, outages))
                            count += 1
                        k += 1
        return count

    def _run(
        self,
        plan: ProbePlan,
        slot: float,
        day_index: int,
        rng: random.Random,
        outages: dict[int, tuple[float, float]],
    ) -> tuple:
        profile = plan.profile
        _slug, _name, out_target, ttft_factor, input_tokens = plan.workload
        slot_at = datetime.fromtimestamp(slot, UTC)
        started_at = slot_at + timedelta(seconds=rng.uniform(0, 5))
        hour = (slot % 86400) / 3600
        load = 1 + profile.diurnal_amplitude * math.cos(
            2 * math.pi * (hour - profile.peak_hour) / 24
        )
        speed_factor = profile.change_factor if day_index >= profile.change_day else 1.0
        speed_factor *= 1 - profile.slowdown_at(slot)

        outage = outages.get(plan.provider_index)
        status = "ok"
        if outage and outage[0] <= slot < outage[1]:
            status = rng.choice(("server_error", "timeout_connect", "server_error"))
        elif rng.random() < profile.error_rate:
            status = rng.choices(_FAILURE_KINDS, _FAILURE_WEIGHTS)[0]

        common = (
            plan.probe_id,
            plan.endpoint_id,
            plan.workload_id,
            plan.region,
            f"synthetic@{plan.region}",
            slot_at,
            uuid.uuid4(),
            0,
            started_at,
            status,
        )
        connect = plan.region_rtt_ms * rng.uniform(1.0, 1.5)
        if status != "ok":
            http = _FAILURE_HTTP.get(status, 500 if status == "server_error" else None)
            reached = status in ("server_error", "rate_limited", "stream_error", "truncated")
            return (
                *common,
                http,
                f"synthetic {status}",
                rng.choice((1.0, 5.0, 30.0)) if status == "rate_limited" else None,
                connect,
                False,
                connect + rng.uniform(20, 200) if reached else None,
                *(None,) * 4,  # ttft_ms, ttfat_ms, e2e_ms, output_tokens
                "",
                *(None,) * 9,  # speeds, inter-token latencies, events
                input_tokens,
                "",
                False,
                False,
                None,
                profile.price_in,
                profile.price_out,
                "synthetic",
                "",  # read_path: no client read these runs
                "single",  # role: one request per run, no run groups
                False,  # stopped_short
                "",  # check_detail: no answer checks
            )

        ttft = profile.ttft_ms * ttft_factor * load * rng.lognormvariate(0, 0.3)
        if rng.random() < 0.02:
            ttft *= rng.uniform(2, 6)  # the occasional queueing spike
        ttft += plan.region_rtt_ms
        ttfat = ttft + rng.uniform(500, 4000) if profile.reasoning else ttft
        tps = profile.tps * speed_factor / load * rng.lognormvariate(0, 0.12)
        tokens = max(2, int(out_target * rng.uniform(0.8, 1.1)))
        decode_ms = (tokens - 1) / tps * 1000
        e2e = ttft + decode_ms
        per_event = rng.choice((1.0, 1.0, 1.0, 2.0, 4.0)) if tps < 400 else rng.uniform(3, 12)
        events = max(1, round(tokens / per_event))
        itl = decode_ms / max(1, events - 1)
        cost = (input_tokens * profile.price_in + tokens * profile.price_out) / 1e6
        return (
            *common,
            200,
            "",
            None,
            connect,
            False,
            ttft * rng.uniform(0.6, 0.95),
            ttft,
            ttfat,
            e2e,
            tokens,
            "usage",
            tps,
            tokens / e2e * 1000,
            itl,
            itl * rng.uniform(1.5, 3),
            itl * rng.uniform(3, 8),
            itl * rng.uniform(8, 40),
            decode_ms / (tokens - 1),
            events,
            tokens / events,
            input_tokens,
            "stop" if rng.random() < 0.9 else "length",
            not counts_for_speed(tokens),
            False,
            round(cost, 8),
            profile.price_in,
            profile.price_out,
            "synthetic",
            "",  # read_path: no client read these runs
            "single",  # role: one request per run, no run groups
            False,  # stopped_short
            "",  # check_detail: no answer checks
        )
