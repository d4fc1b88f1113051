"""``manage.py simulate_provider``: the simulated provider (also the demo's providers)."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from probes.simulator.__main__ import add_arguments, serve


class Command(BaseCommand):
    help = (
        "Run an OpenAI- and Anthropic-compatible streaming server that emits on absolute "
        "deadlines (known schedule), reports usage and server timing, and misbehaves on "
        "demand (--fault) or some of the time (--error-rate). The request's model name selects "
        "a speed profile: sim-blazing, sim-fast, sim-gpu, sim-flaky, sim-batched, sim-jittery, "
        "sim-reasoner, or any other name for the profile set by the options; "
        "NAME@tps=R,ttft=T,k=K,fault=F,errors=P overrides per request."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_arguments(parser)

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["tps"] < 0 or opts["ttft_ms"] < 0 or opts["tokens_per_event"] < 1:
            raise CommandError("--tps and --ttft-ms must be >= 0, --tokens-per-event >= 1")
        if not 0 <= opts["jitter"] < 100:
            raise CommandError("--jitter is a percentage in [0, 100)")
        if not 0 <= opts["port"] < 65536:
            raise CommandError("--port must be in 0..65535")

        class Args:
            pass

        args = Args()
        args.__dict__.update(opts)
        try:
            asyncio.run(serve(args))  # type: ignore[arg-type]
        except KeyboardInterrupt:
            pass
        except OSError as exc:
            raise CommandError(f"cannot listen on {opts['host']}:{opts['port']}: {exc}") from None
