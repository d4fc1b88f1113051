"""Speed profiles of the simulated provider, selected by the request's model name.

A model name may carry overrides after ``@``: ``sim-fast@tps=4200,ttft=80,k=4,fault=stall``
(keys: tps, ttft, k, jitter, fault, after, reasoning, tokens, seed, slow, errors, vocab,
sentence, usage, prefill, contention, episode_first, episode_for, episode_every,
episode_slowdown). Tests and
benchmarks use this to get any schedule from one running server.

``error_rate`` makes a profile fail sometimes, like a real provider: each request fails with
that probability, with a fault drawn from ``error_faults``. The draws come from a random
generator seeded by the profile's ``seed``, so a given sequence of requests always meets the
same failures.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

FAULTS = (
    "none",
    "auth",  # 401
    "not_found",  # 404
    "rate_limit",  # 429 with retry-after
    "server_error",  # 500
    "html_200",  # an HTML error page with status 200
    "stall",  # stops sending mid-stream, keeps the connection open
    "disconnect",  # closes the connection mid-stream (FIN, body incomplete)
    "reset",  # resets the connection mid-stream (RST)
    "malformed_json",  # one event with broken JSON
    "error_event",  # an error object / `event: error` mid-stream
    "no_done",  # completes with a finish_reason but no [DONE] / message_stop
    "truncate",  # ends the body cleanly mid-stream, no finish_reason, no marker
    "slow_first_token",  # first token after `slow_ttft_s`
    "endless",  # never stops
    "huge_event",  # one 6 MiB event
    "invalid_utf8",  # an event with bytes that are not UTF-8
)

# What "fails sometimes" looks like at real providers: throttling, a server error, a
# stream cut off mid-answer, a stream that stops sending.
REALISTIC_FAULTS = ("rate_limit", "server_error", "disconnect", "stall")
USAGE_MODES = ("full", "none", "eval_count")


@dataclass(frozen=True)
class Profile:
    name: str = "sim-default"
    tps: float = 2100.0  # tokens per second; 0 = as fast as the socket takes them
    ttft_ms: float = 80.0  # request received -> first output event sent
    tokens_per_event: int = 1
    jitter_pct: float = 0.0  # each gap scaled by 1 +/- jitter (seeded, so reproducible)
    fault: str = "none"
    fault_after: int | None = None  # output events before a mid-stream fault (default n/2)
    reasoning_tokens: int = 0  # streamed as reasoning before the answer
    # Where the model ends its answer (its end of sequence), below the request's
    # max_tokens; a request's min_tokens or ignore_eos hold it off, as in vLLM.
    max_output_tokens: int | None = None
    slow_ttft_s: float = 3600.0
    seed: int = 1
    error_rate: float = 0.0  # probability that a request fails with one of error_faults
    error_faults: tuple[str, ...] = REALISTIC_FAULTS
    # What a stream says and reports (probes/simulator/content.py).
    vocab: str = "plain"  # "odd": words o200k splits into several tokens
    sentence_tokens: int = 0  # a full stop every N answer tokens (0: none)
    usage: str = "full"  # "none": no usage at all; "eval_count": Ollama's final count only
    # Prompt tokens per second of prefill, added to the TTFT for the prompt's uncached
    # tokens (0: TTFT is ttft_ms whatever the prompt). A prompt seen before is cached.
    prefill_tps: float = 0.0
    # A batched server: every other stream of this profile in flight slows each one by
    # this share (8 at once with 0.1 stream at 1 / 1.7 of the speed alone), so a parallel
    # workload's slowdown shows. 0: streams never meet.
    contention: float = 0.0
    # Slow episodes, as a provider has under load: from `episode_first_s` after the server
    # started, for `episode_for_s`, again every `episode_every_s` (0: never), speed and
    # prefill divided by `episode_slowdown` and the fixed TTFT times it, so the whole TTFT
    # (fixed part and prefill) is that many times longer, as the demo's alert should say.
    episode_first_s: float = 0.0
    episode_for_s: float = 0.0
    episode_every_s: float = 0.0
    episode_slowdown: float = 1.0

    def __post_init__(self) -> None:
        for fault in (self.fault, *self.error_faults):
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r}; expected one of {', '.join(FAULTS)}")
        if self.tps < 0 or self.ttft_ms < 0 or self.tokens_per_event < 1:
            raise ValueError("tps and ttft_ms must be >= 0 and tokens_per_event >= 1")
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be in [0, 1], got {self.error_rate}")
        if self.vocab not in ("plain", "odd"):
            raise ValueError(f"vocab must be plain or odd, got {self.vocab!r}")
        if self.usage not in USAGE_MODES:
            raise ValueError(f"usage must be one of {', '.join(USAGE_MODES)}, got {self.usage!r}")
        if self.prefill_tps < 0 or self.contention < 0:
            raise ValueError("prefill_tps and contention must be >= 0")
        if self.sentence_tokens < 0:
            raise ValueError("sentence_tokens must be >= 0")
        if self.error_rate and not self.error_faults:
            raise ValueError("error_rate needs at least one fault in error_faults")

    def in_episode(self, uptime_s: float) -> bool:
        if not self.episode_every_s or uptime_s < self.episode_first_s:
            return False
        return (uptime_s - self.episode_first_s) % self.episode_every_s < self.episode_for_s

    def at(self, uptime_s: float) -> Profile:
        """This profile `uptime_s` seconds after the server started: slowed in an episode."""
        if not self.in_episode(uptime_s):
            return self
        factor = self.episode_slowdown
        return dataclasses.replace(
            self,
            tps=self.tps / factor,
            ttft_ms=self.ttft_ms * factor,
            prefill_tps=self.prefill_tps / factor,
        )

    def for_request(self, rng: random.Random) -> Profile:
        """This profile as one request meets it: failing with a drawn fault, or as it is."""
        if not self.error_rate or rng.random() >= self.error_rate:
            return self
        return dataclasses.replace(self, fault=rng.choice(self.error_faults), error_rate=0.0)


# The demo's profiles end a sentence every SENTENCE tokens, as a model does (voice-turn
# times the first one); the test profiles stream bare words.
SENTENCE = 16

# One process, one port, one profile per model name. The first four are the demo's
# providers (probes/catalog/seeds.py), at the speeds the seeds quote.
BUILTIN = {
    p.name: p
    for p in (
        Profile(
            "sim-blazing", tps=2100, ttft_ms=80, sentence_tokens=SENTENCE, prefill_tps=40000
        ),  # wafer-scale
        Profile(  # LPU; three times slower for 20 minutes every 3 hours, first at 20 minutes
            "sim-fast",
            tps=400,
            ttft_ms=150,
            sentence_tokens=SENTENCE,
            prefill_tps=20000,
            episode_first_s=20 * 60,
            episode_for_s=20 * 60,
            episode_every_s=3 * 3600,
            episode_slowdown=3.0,
        ),
        Profile(
            "sim-gpu",
            tps=120,
            ttft_ms=300,
            sentence_tokens=SENTENCE,
            prefill_tps=5000,
            contention=0.1,
        ),  # GPU cloud: a batched server, slower per stream under load
        Profile(
            "sim-flaky",
            tps=200,
            ttft_ms=200,
            jitter_pct=10,
            error_rate=0.25,
            sentence_tokens=SENTENCE,
        ),
        Profile("sim-batched", tps=1000, ttft_ms=200, tokens_per_event=8),
        Profile("sim-jittery", tps=80, ttft_ms=400, jitter_pct=30),
        Profile("sim-reasoner", tps=300, ttft_ms=250, reasoning_tokens=120),
    )
}

_KEYS = {
    "tps": ("tps", float),
    "ttft": ("ttft_ms", float),
    "k": ("tokens_per_event", int),
    "jitter": ("jitter_pct", float),
    "fault": ("fault", str),
    "after": ("fault_after", int),
    "reasoning": ("reasoning_tokens", int),
    "tokens": ("max_output_tokens", int),
    "seed": ("seed", int),
    "slow": ("slow_ttft_s", float),
    "errors": ("error_rate", float),
    "vocab": ("vocab", str),
    "sentence": ("sentence_tokens", int),
    "usage": ("usage", str),
    "prefill": ("prefill_tps", float),
    "contention": ("contention", float),
    "episode_first": ("episode_first_s", float),
    "episode_for": ("episode_for_s", float),
    "episode_every": ("episode_every_s", float),
    "episode_slowdown": ("episode_slowdown", float),
}


def resolve(model: str, default: Profile) -> Profile:
    """The profile for a model name: built-in or default, then ``@key=value`` overrides."""
    base_name, _, overrides = model.partition("@")
    profile = BUILTIN.get(base_name, default)
    if not overrides:
        return profile
    changes: dict[str, object] = {}
    for item in overrides.split(","):
        key, _, value = item.partition("=")
        if key.strip() not in _KEYS:
            raise ValueError(f"unknown profile key {key!r} in model {model!r}")
        field, cast = _KEYS[key.strip()]
        changes[field] = cast(value.strip())
    return dataclasses.replace(profile, **changes)
