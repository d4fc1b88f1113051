"""``manage.py measure``: stream one request (or several) and print the metrics."""

from __future__ import annotations

import dataclasses
import os
import random
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from probes import kinds
from probes.catalog import workload_suite
from probes.engine import APIS, Limits, ProbeRequest, RunResult
from probes.engine.request import TOKEN_COUNTERS
from probes.models import Workload

_TABLE = (
    ("status", "status", 14),
    ("http", "http_status", 4),
    ("ttfb ms", "ttfb_ms", 8),
    ("ttft ms", "ttft_ms", 9),
    ("ttfat ms", "ttfat_ms", 9),
    ("e2e ms", "e2e_ms", 9),
    ("out tok", "output_tokens", 7),
    ("src", "token_source", 5),
    ("tok/s", "output_tps", 9),
    ("o200k/s", "output_tps_o200k", 9),
    ("prefill/s", "prefill_tps", 9),
    ("events", "output_events", 6),
    ("tok/ev", "tokens_per_event", 6),
)


def _with(workload: Any, **changes: Any) -> Any:
    """The workload with some fields changed, for this command only (never saved)."""
    if dataclasses.is_dataclass(workload):
        return dataclasses.replace(workload, **changes)
    for name, value in changes.items():
        setattr(workload, name, value)
    return workload


class Command(BaseCommand):
    help = (
        "Measure streaming speed of any OpenAI- or Anthropic-compatible endpoint: one JSON "
        "object per run with --json (fields as on /methodology/), a table otherwise. "
        "A failed measurement is a result with its status (exit 0)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", required=True, help="e.g. http://localhost:8000/v1")
        parser.add_argument("--model", required=True)
        parser.add_argument("--api", choices=APIS, default="openai-chat")
        parser.add_argument(
            "--api-key-env", metavar="NAME", help="environment variable holding the API key"
        )
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--prompt", help="a single user message")
        source.add_argument(
            "--workload",
            help=f"a workload of the suite ({', '.join(workload_suite.BY_SLUG)}) or one added "
            f"in the admin; default {workload_suite.DEFAULT_SLUG}",
        )
        parser.add_argument(
            "--seed", type=int, help="prompt seed (default: a fresh one per run, printed)"
        )
        parser.add_argument(
            "--token-counter",
            choices=TOKEN_COUNTERS,
            help="without usage in the stream, ask the server's tokenizer (else o200k)",
        )
        parser.add_argument(
            "--server-metrics",
            metavar="URL",
            help="the server's Prometheus /metrics (vLLM, llama.cpp, SGLang, TGI), read "
            "before and after each run: server_queue_ms, server_prefill_ms, server_decode_ms, "
            "server_window, server_running_requests",
        )
        parser.add_argument(
            "--power-metrics",
            metavar="URL",
            help="a DCGM exporter's /metrics (or with --power-query a Prometheus "
            "/api/v1/query URL): energy_j and output_tokens_per_j per run",
        )
        parser.add_argument(
            "--power-selector", metavar="LABEL=VALUE", default="", help="e.g. gpu=0"
        )
        parser.add_argument(
            "--power-query", metavar="EXPR", help="an energy counter in joules (Prometheus)"
        )
        parser.add_argument("--max-tokens", type=int, help="default: the workload's, or 256")
        parser.add_argument("--repeat", type=int, default=1)
        parser.add_argument("--include-text", action="store_true")
        parser.add_argument("--json", action="store_true", help="one JSON object per run")
        parser.add_argument("--no-warm", action="store_true", help="skip the warm-up request")
        parser.add_argument("--first-token-timeout", type=float, default=Limits.first_token_s)
        parser.add_argument("--stall-timeout", type=float, default=Limits.stall_s)
        parser.add_argument("--total-timeout", type=float, default=Limits.total_s)

    def handle(self, *args: Any, **opts: Any) -> None:
        # The client (httpx) loads here, not with the module: `help measure` needs none.
        from probes.engine import measure_all_sync, measure_sync

        req = self._request(opts)
        if req.token_counter is None:
            req = self._find_token_counter(req)
        if opts["prompt"] is not None:
            for i in range(opts["repeat"]):
                self._show(i, kinds.Measured(0, "single", measure_sync(req)), opts)
            return
        workload = self._workload(opts["workload"] or workload_suite.DEFAULT_SLUG)
        if opts["max_tokens"]:
            workload = _with(workload, max_tokens=opts["max_tokens"])
        row = 0
        for _ in range(opts["repeat"]):
            seed = opts["seed"] if opts["seed"] is not None else random.getrandbits(62)

            plan = kinds.Plan(
                workload=workload,
                # The kind sets each request's messages and its check's fields.
                template=dataclasses.replace(
                    req, max_tokens=workload.max_tokens, include_text=opts["include_text"]
                ),
                # Request i of a group gets its own prompt (parallel); a cached pair and a
                # loop use request 0's.
                seed_of=lambda index, seed=seed: seed + index,
                measure_one=measure_sync,
                measure_many=measure_all_sync,
            )
            for measured in _measured_and_judged(plan):
                if kinds.of(workload).curve and measured.role == "group":
                    self._show_steps(measured, opts)  # the curve, one row per step
                elif kinds.of(workload).curve:
                    continue
                self._show(row, measured, opts)
                row += 1

    def _find_token_counter(self, req: ProbeRequest) -> ProbeRequest:
        """Without --token-counter, the server's tokenize route as Test connection finds it
        (used only when a stream carries no usage: o200k would be far off a Llama
        tokenizer's count)."""
        headers = {k: v for k, v in req.headers().items() if k not in ("accept", "content-type")}
        from probes.engine import tokenize

        found = tokenize.detect_sync(req.base_url, req.model, headers, total_s=8.0)
        if found is None:
            return req
        self.stderr.write(f"token count without usage: the server's tokenizer ({found})")
        return dataclasses.replace(req, token_counter=found)

    def _workload(self, slug: str) -> Any:
        try:
            return workload_suite.get(slug)
        except KeyError as exc:
            message = exc.args[0]
        try:  # one the admin added (e.g. parallel-16), when a database is reachable
            return Workload.objects.get(slug=slug)
        except (Workload.DoesNotExist, DatabaseError):
            raise CommandError(message) from None

    def _show_steps(self, measured: kinds.Measured, opts: dict[str, Any]) -> None:
        steps = (measured.group_summary or {}).get("steps") or []
        if opts["json"]:
            for step in steps:
                self.stdout.write(orjson.dumps(step).decode())
            return
        columns = ("concurrency", "per_request_tps", "aggregate_tps", "ttft_ms_p50",
                   "ttft_ms_p95", "goodput")  # fmt: skip
        self.stdout.write(" ".join(name.rjust(15) for name in columns))
        for step in steps:
            cells = ("-" if step[c] is None else f"{step[c]:g}" for c in columns)
            self.stdout.write(" ".join(cell.rjust(15) for cell in cells))
        self.stdout.write(f"knee at concurrency {measured.group_summary.get('knee') or '-'}")

    def _show(self, i: int, measured: kinds.Measured, opts: dict[str, Any]) -> None:
        if opts["json"]:
            data = measured.as_json()
            if opts["include_text"]:
                data["text"] = measured.result.text
                data["reasoning_text"] = measured.result.reasoning_text
            self.stdout.write(orjson.dumps(data).decode())
        else:
            self._print_row(i, measured, opts["include_text"])

    def _request(self, opts: dict[str, Any]) -> ProbeRequest:
        if opts["repeat"] < 1:
            raise CommandError("--repeat must be at least 1")
        if opts["max_tokens"] is not None and opts["max_tokens"] < 1:
            raise CommandError("--max-tokens must be at least 1")
        for name in ("first_token_timeout", "stall_timeout", "total_timeout"):
            if opts[name] <= 0:
                raise CommandError(f"--{name.replace('_', '-')} must be positive")
        api_key = None
        if opts["api_key_env"]:
            api_key = os.environ.get(opts["api_key_env"])
            if not api_key:
                raise CommandError(f"environment variable {opts['api_key_env']} is not set")
        # Workload runs replace the messages and max_tokens per request (probes/kinds/).
        messages = [{"role": "user", "content": opts["prompt"] or "Say hello."}]
        max_tokens = opts["max_tokens"] or 256
        limits = Limits(
            first_token_s=opts["first_token_timeout"],
            stall_s=opts["stall_timeout"],
            total_s=opts["total_timeout"],
        )
        from probes.engine.energy import SelectorError
        from probes.engine.telemetry import Telemetry

        try:
            telemetry = None
            if opts["server_metrics"] or opts["power_metrics"]:
                telemetry = Telemetry(
                    server_metrics_url=opts["server_metrics"],
                    power_url=opts["power_metrics"],
                    power_query=opts["power_query"],
                    power_selector=opts["power_selector"],
                )
            elif opts["power_selector"] or opts["power_query"]:
                raise CommandError("--power-selector and --power-query need --power-metrics")
            return ProbeRequest(
                api=opts["api"],
                base_url=opts["base_url"],
                model=opts["model"],
                api_key=api_key,
                messages=messages,
                max_tokens=max_tokens,
                limits=limits,
                warm=not opts["no_warm"],
                include_text=opts["include_text"],
                token_counter=opts["token_counter"],
                telemetry=telemetry,
            )
        except (ValueError, SelectorError) as exc:
            raise CommandError(str(exc)) from None

    def _print_row(self, i: int, measured: kinds.Measured, include_text: bool) -> None:
        result: RunResult = measured.result
        if i == 0:
            header = "run  " + " ".join(title.rjust(width) for title, _, width in _TABLE)
            self.stdout.write(header)
        cells = []
        for _, name, width in _TABLE:
            value = getattr(result, name)
            text = (
                "-"
                if value is None
                else (f"{value:.1f}" if isinstance(value, float) else str(value))
            )
            cells.append(text.rjust(width))
        label = "grp" if measured.role == "group" else f"{i + 1}"
        self.stdout.write(f"{label:<4} " + " ".join(cells))
        if measured.group_summary:
            summary = {k: v for k, v in measured.group_summary.items() if v is not None}
            self.stdout.write(f"     group: {orjson.dumps(summary).decode()}")
        if measured.output_valid is not None:
            verdict = "valid" if measured.output_valid else f"INVALID ({measured.check_detail})"
            self.stdout.write(f"     answer: {verdict}")
        if measured.stopped_short:
            self.stdout.write("     stopped far short of the workload's target length")
        if result.error:
            self.stdout.write(f"     error: {result.error}")
        if include_text and result.text is not None:
            if result.reasoning_text:
                self.stdout.write(f"     reasoning: {result.reasoning_text}")
            self.stdout.write(f"     text: {result.text}")


def _measured_and_judged(plan: kinds.Plan) -> list[kinds.Measured]:
    """The workload's requests, judged, and a group's summary: a slot's measure and judge
    stages without its caps or its recording."""
    from probes.slots import judge  # the slot's path (its Redis, the store): when run

    kind, workload = kinds.of(plan.workload), plan.workload
    members = [judge.judge_answer(workload, m) for m in kind.requests(plan)]
    if not kind.group:
        return members
    return [*members, judge.summarize(workload, members, kind.size(workload), plan.cap)]
