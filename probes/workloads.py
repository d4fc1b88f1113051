"""The standard workload suite: deterministic prompts, built offline.

The catalog loader turns each entry into a Workload row. Prompts are generated from
fixed text with no randomness and no network, so every probe of a workload sends the
same bytes (and providers' prompt caches see the same prefix, as for any repeat user).
Input sizes are o200k_base tokens; other tokenizers differ by a few percent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from probes.engine import tokens

_PASSAGE = (
    "The history of measurement is a history of agreement. Long before clocks kept the "
    "same time in every town, merchants and builders needed units they could share: a "
    "foot that was the same foot on both sides of a river, a pound that weighed the same "
    "in the market as in the warehouse. Each new standard made trade a little easier and "
    "arguments a little shorter. Railways forced the adoption of standard time zones, "
    "because a timetable is useless when every station keeps its own noon. Engineers "
    "learned to state not only a value but its uncertainty, and to say exactly how it "
    "was obtained, so that someone else could repeat the measurement and get the same "
    "answer. "
)

_TOPICS = (
    "how weather stations report temperature",
    "why bridges have expansion joints",
    "how libraries organise their shelves",
    "what makes a good map legend",
    "how orchestras tune before a concert",
    "why ships use nautical miles",
    "how bakers scale a recipe",
    "what a census tries to count",
    "how lighthouses were kept lit",
    "why athletes are timed to the hundredth",
)


def _document(target_tokens: int) -> str:
    """Numbered sections of fixed prose, about ``target_tokens`` o200k tokens long."""
    sections = []
    i = 0
    # ~143 tokens per section (passage + heading); the exact count is measured in tests.
    while len(sections) * 143 < target_tokens:
        topic = _TOPICS[i % len(_TOPICS)]
        sections.append(f"Section {i + 1}: on {topic}.\n{_PASSAGE}")
        i += 1
    return "\n\n".join(sections)


@dataclass(frozen=True)
class Workload:
    slug: str
    name: str
    description: str
    messages: list[dict[str, Any]] = field(hash=False)
    max_tokens: int
    reasoning: bool = False

    @property
    def input_tokens(self) -> int:
        """The prompt's size in o200k_base tokens (message texts only, no template)."""
        return sum(tokens.count(m.get("content")) for m in self.messages)


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        slug="chat-1k",
        name="Chat, ~1,000 input tokens",
        description=(
            "The headline workload: about 1,000 input tokens and up to 500 output tokens, "
            "like Artificial Analysis' standard prompt. Long enough output for a stable "
            "tokens/s figure."
        ),
        messages=[
            {"role": "system", "content": "You are a helpful, precise assistant."},
            {
                "role": "user",
                "content": _document(950)
                + "\n\nWrite a detailed essay of about 400 words on why shared units and "
                "repeatable methods matter in science and engineering, drawing on the "
                "sections above.",
            },
        ],
        max_tokens=500,
    ),
    Workload(
        slug="short",
        name="Short prompt",
        description=(
            "A one-line question with a short answer: latency-bound, shows TTFT and "
            "overhead. Too short for speed rankings (flagged short_output)."
        ),
        messages=[{"role": "user", "content": "In one sentence, what is a standard unit?"}],
        max_tokens=64,
    ),
    Workload(
        slug="long-10k",
        name="Long input, ~10,000 tokens",
        description=(
            "About 10,000 input tokens and a 300-token answer: exposes prefill speed and "
            "prompt caching in TTFT."
        ),
        messages=[
            {"role": "system", "content": "You are a careful reader who answers briefly."},
            {
                "role": "user",
                "content": _document(9950)
                + "\n\nList the distinct topics of the sections above, then summarise in "
                "about 200 words what they have in common.",
            },
        ],
        max_tokens=300,
    ),
    Workload(
        slug="reasoning",
        name="Reasoning puzzle",
        description=(
            "A small logic puzzle for reasoning models: TTFT includes thinking, TTFAT "
            "shows when the answer starts. Generous max_tokens so thinking can finish."
        ),
        messages=[
            {
                "role": "user",
                "content": (
                    "Three friends, Ana, Ben and Caro, each own one pet: a cat, a dog or a "
                    "fish. Ana does not own the dog. The owner of the fish is older than "
                    "Ben. Caro is the youngest and does not own the cat. Who owns which "
                    "pet? Explain your reasoning step by step, then give the answer."
                ),
            }
        ],
        max_tokens=2000,
        reasoning=True,
    ),
)

BY_SLUG = {w.slug: w for w in WORKLOADS}


def get(slug: str) -> Workload:
    try:
        return BY_SLUG[slug]
    except KeyError:
        raise KeyError(f"unknown workload {slug!r}; known: {', '.join(BY_SLUG)}") from None
