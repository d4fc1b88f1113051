"""``python -m probes.simulator``: the simulated provider without Django."""

from __future__ import annotations

import argparse
import asyncio
import sys

from .events import EVENTS
from .profiles import FAULTS, REALISTIC_FAULTS, Profile
from .scheduler import reduce_timer_slack
from .server import ServerTraits, SimulatorServer
from .telemetry import PowerModel


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Simulated OpenAI/Anthropic-compatible streaming provider with a known "
        "schedule. The model name selects a profile (sim-blazing, sim-fast, sim-gpu, sim-flaky, "
        "sim-batched, sim-jittery, sim-reasoner, or any other name for the "
        "default profile set by the options below); NAME@tps=R,ttft=T,k=K,jitter=J,"
        "fault=F,after=N,reasoning=N,tokens=N,errors=P overrides any of them per request.",
    )
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8099, help="0 picks a free port")
    parser.add_argument("--tps", type=float, default=2100.0, help="tokens per second (0 = flood)")
    parser.add_argument("--ttft-ms", type=float, default=80.0)
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--jitter", type=float, default=0.0, help="percent, per gap")
    parser.add_argument(
        "--api",
        choices=list(EVENTS),
        default=None,
        help="serve only this API (default: all)",
    )
    parser.add_argument("--fault", choices=FAULTS, default="none")
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        help="act as a local server with this context: /props, /v1/models list it, output "
        "stops when the context is full and longer prompts are refused",
    )
    parser.add_argument("--slots", type=int, default=None, help="parallel slots in /props, /slots")
    parser.add_argument("--no-usage", action="store_true", help="omit usage from OpenAI streams")
    parser.add_argument("--tokenize", action="store_true", help="serve POST /tokenize")
    parser.add_argument(
        "--error-rate",
        type=probability,
        default=0.0,
        help="share of requests that fail, each with a fault drawn from "
        f"{', '.join(REALISTIC_FAULTS)} (seeded: the same requests fail on every run)",
    )
    parser.add_argument(
        "--tokenizer",
        choices=("llama.cpp", "vllm", "llama-cpp-python"),
        default=None,
        help="answer that server's tokenize route (default: none, 404 like OpenAI)",
    )
    parser.add_argument(
        "--metrics",
        choices=("vllm", "llama.cpp"),
        default=None,
        help="serve GET /metrics as that engine publishes it (queue/prefill/decode "
        "histograms, running/waiting gauges), following the streams served",
    )
    parser.add_argument(
        "--power",
        type=power_model,
        default=None,
        metavar="IDLE_W,J_PER_TOKEN",
        help="serve GET /dcgm/metrics, a DCGM exporter: GPU 0 draws IDLE_W + J_PER_TOKEN "
        "per output token (W per token/s), GPU 1 idles",
    )
    parser.add_argument(
        "--batch-tps",
        type=float,
        default=None,
        help="a batched server: the streams in flight share this many output tokens/s",
    )


def power_model(text: str) -> PowerModel:
    try:
        idle, per_token = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected IDLE_W,J_PER_TOKEN, got {text!r}") from None
    if idle < 0 or per_token < 0:
        raise argparse.ArgumentTypeError("power figures must be >= 0")
    return PowerModel(idle, per_token)


def probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability between 0 and 1, got {text!r}")
    return value


def profile_from(args: argparse.Namespace) -> Profile:
    return Profile(
        name="sim-default",
        tps=args.tps,
        ttft_ms=args.ttft_ms,
        tokens_per_event=args.tokens_per_event,
        jitter_pct=args.jitter,
        fault=args.fault,
        error_rate=args.error_rate,
    )


async def serve(args: argparse.Namespace) -> None:
    reduce_timer_slack()
    apis = (args.api,) if args.api else tuple(EVENTS)
    traits = ServerTraits(
        context_tokens=args.context_tokens,
        total_slots=args.slots,
        usage=not args.no_usage,
        tokenize=args.tokenize,
        metrics=getattr(args, "metrics", None),
        power=getattr(args, "power", None),
        batch_tps=getattr(args, "batch_tps", None),
    )
    server = SimulatorServer(
        profile_from(args),
        args.host,
        args.port,
        apis,
        traits,
        tokenizer=getattr(args, "tokenizer", None),
    )
    await server.start()
    print(f"listening on {server.base_url}", flush=True)
    await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    args = build_parser("python -m probes.simulator").parse_args(argv)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
