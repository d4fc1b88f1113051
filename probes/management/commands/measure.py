"""``manage.py measure``: stream one request (or several) and print the metrics."""

from __future__ import annotations

import os
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from probes import workloads
from probes.engine import APIS, Limits, ProbeRequest, RunResult, measure_sync

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
    ("events", "output_events", 6),
    ("tok/ev", "tokens_per_event", 6),
)


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
            help=f"a standard workload ({', '.join(workloads.BY_SLUG)}); default chat-1k",
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
        req = self._request(opts)
        for i in range(opts["repeat"]):
            result = measure_sync(req)
            if opts["json"]:
                line = orjson.dumps(result.to_dict(include_text=opts["include_text"]))
                self.stdout.write(line.decode())
            else:
                self._print_row(i, result, opts["include_text"])

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
        if opts["prompt"] is not None:
            messages = [{"role": "user", "content": opts["prompt"]}]
            max_tokens = opts["max_tokens"] or 256
        else:
            try:
                workload = workloads.get(opts["workload"] or "chat-1k")
            except KeyError as exc:
                raise CommandError(exc.args[0]) from None
            messages = workload.messages
            max_tokens = opts["max_tokens"] or workload.max_tokens
        limits = Limits(
            first_token_s=opts["first_token_timeout"],
            stall_s=opts["stall_timeout"],
            total_s=opts["total_timeout"],
        )
        try:
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
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None

    def _print_row(self, i: int, result: RunResult, include_text: bool) -> None:
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
        self.stdout.write(f"{i + 1:<4} " + " ".join(cells))
        if result.error:
            self.stdout.write(f"     error: {result.error}")
        if include_text and result.text is not None:
            if result.reasoning_text:
                self.stdout.write(f"     reasoning: {result.reasoning_text}")
            self.stdout.write(f"     text: {result.text}")
