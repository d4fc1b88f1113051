"""Fresh, reproducible prompts: built from a workload's spec and a seed, offline.

Every run gets its own seed (derived from the run's identity), so no two runs send the
same prefix and a provider's prompt cache cannot serve the prompt; a deliberate cached
workload sends one prompt twice instead. The same spec and seed always give the same
messages, byte for byte, so a stored run is regenerated from its seed (the text itself is
never stored). All text comes from files shipped here: nothing is downloaded.

Sizes are o200k_base tokens of all message contents; the build lands within
``SIZE_TOLERANCE`` of the target (a test checks many seeds).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from probes.engine import tokens

SIZE_TOLERANCE = 0.10
MATERIALS = ("prose", "code", "turn", "puzzle", "fixed")
_HERE = Path(__file__).resolve().parent


@cache
def sentences() -> tuple[str, ...]:
    lines = (_HERE / "corpus.txt").read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


@cache
def code_blocks() -> tuple[str, ...]:
    """The sample module's top-level blocks: imports and globals, then each function."""
    text = (_HERE / "legacy_billing.py.txt").read_text(encoding="utf-8")
    return tuple(block.strip("\n") for block in text.split("\n\n\n"))


@dataclass(frozen=True)
class PromptSpec:
    """What a workload asks for; ``probes.models.Workload.prompt_spec()`` builds one."""

    slug: str
    material: str = "prose"  # one of MATERIALS
    input_tokens: int = 1000  # target, o200k tokens of all messages
    instruction: str = ""  # the task, after the material ({words} = target words)
    system: str = ""
    output_tokens: int = 500  # what the instruction asks for (steers the length)
    fixed_messages: list[dict[str, Any]] = field(default_factory=list, hash=False)

    def __post_init__(self) -> None:
        if self.material not in MATERIALS:
            raise ValueError(f"material must be one of {', '.join(MATERIALS)}")


def _rng(spec: PromptSpec, seed: int, salt: str = "") -> random.Random:
    # A str seed is hashed with SHA-512: the same on every platform and Python version.
    return random.Random(f"{spec.slug}:{seed}:{salt}")


def _nonce(rng: random.Random) -> str:
    return f"{rng.getrandbits(48):012x}"


def _words(spec: PromptSpec) -> int:
    return max(10, round(spec.output_tokens * 0.75 / 10) * 10)  # ~0.75 words per token


def _instruction(spec: PromptSpec) -> str:
    return spec.instruction.replace("{words}", f"{_words(spec):,}")


def build(spec: PromptSpec, seed: int) -> list[dict[str, Any]]:
    """The messages of run ``seed`` of this workload."""
    if spec.material == "fixed":
        return [dict(m) for m in spec.fixed_messages]
    rng = _rng(spec, seed)
    nonce = _nonce(rng)
    # The nonce opens the first message, so even the system prompt's prefix is new.
    system = f"Session {nonce}. {spec.system}".strip() if spec.system else ""
    opener = "" if system else f"Session {nonce}.\n\n"
    instruction = _instruction(spec)
    fixed = tokens.count(system) + tokens.count(opener) + tokens.count(instruction) + 4
    budget = max(0, spec.input_tokens - fixed)

    def assemble(body: str) -> list[dict[str, Any]]:
        user = f"{opener}{body}\n\n{instruction}".strip() if body else f"{opener}{instruction}"
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": user})
        return messages

    if spec.material == "prose":
        return assemble(_prose(rng, budget))
    if spec.material == "code":
        return assemble(_code(rng))
    if spec.material == "puzzle":
        return assemble(_puzzle(rng))
    # A turn is a few sentences of ~20 tokens: of a few drafts, send the closest in size.
    drafts = [assemble(_turn(rng, budget)) for _ in range(4)]
    return min(drafts, key=lambda m: abs(input_size(m) - spec.input_tokens))


def input_size(messages: list[dict[str, Any]]) -> int:
    """o200k tokens of the messages' text (what the ±10 % target is measured on)."""
    return sum(tokens.count(m.get("content")) for m in messages if isinstance(m, dict))


def _fill(rng: random.Random, budget: int, headings: bool) -> list[str]:
    """Shuffled corpus sentences (in numbered sections) adding up to about ``budget``.

    A sentence costs its tokens with the space before it (o200k merges that space into
    the sentence's first word), so the running sum tracks the joined text closely.
    """
    pool = sentences()
    parts: list[str] = []
    used = 0
    section = 0
    order: list[str] = []
    misses = 0  # sentences in a row too long for the room left
    while used < budget * 0.98 and misses < len(pool):
        if not order:
            order = list(pool)
            rng.shuffle(order)
        if headings and (section == 0 or rng.random() < 0.12):
            section += 1
            heading = f"\n\nSection {section}.\n" if parts else f"Section {section}.\n"
            parts.append(heading)
            used += tokens.count(heading)
        sentence = order.pop()
        cost = tokens.count(" " + sentence)
        # Over the budget is fine when it lands closer to it than stopping short would.
        if used + cost > budget * (1 + SIZE_TOLERANCE / 2) and used + cost - budget > budget - used:
            if used >= budget * 0.95:
                break
            misses += 1
            continue  # too long for the room left: try a shorter one
        misses = 0
        parts.append(sentence if not parts or parts[-1].endswith("\n") else " " + sentence)
        used += cost
    return parts


def _prose(rng: random.Random, budget: int) -> str:
    """Numbered sections of shuffled corpus sentences, about ``budget`` tokens."""
    return "".join(_fill(rng, budget, headings=True)).strip()


def _code(rng: random.Random) -> str:
    """The sample module, its functions in a seeded order (the imports stay first)."""
    head, *functions = code_blocks()
    rng.shuffle(functions)
    return "```python\n" + "\n\n\n".join([head, *functions]) + "\n```"


_TURNS = (
    "Can you remind me what time the pharmacy on the corner closes tonight?",
    "I'm about to leave, is it going to rain in the next hour?",
    "What's a quick dinner I can make with eggs, spinach and some bread?",
    "How long should I boil an egg if I want the yolk still soft?",
    "Set a reminder to call the plumber tomorrow morning, please.",
    "What's the difference between a nautical mile and a normal mile?",
    "Can you suggest a ten minute stretch before I go for a run?",
    "How do I convert a recipe from cups to grams for flour?",
    "I missed the train, what's the next best way to get across town?",
    "Read me something calming, I have a few minutes before my meeting.",
)


# Short asides that fine-tune a turn's size (corpus sentences are ~20 tokens each).
_ASIDES = (
    "Sorry, I'm walking.",
    "Quickly, please.",
    "I'm in the kitchen.",
    "Thanks in advance.",
    "Keep it simple.",
    "I only have a minute.",
    "It's a bit noisy here.",
)


def _turn(rng: random.Random, budget: int) -> str:
    """A short spoken turn: a little context and an aside or two, then the question."""
    question = rng.choice(_TURNS)
    room = budget - tokens.count(question) - 2
    parts = _fill(rng, room, headings=False) if room > 10 else []
    used = tokens.count("".join(parts))
    for aside in rng.sample(_ASIDES, len(_ASIDES)):
        cost = tokens.count(" " + aside)
        if used >= room * 0.97 or used + cost > room * 1.03:
            continue
        parts.append(" " + aside if parts else aside)
        used += cost
    context = "".join(parts).strip()
    return f"{context}\n\n{question}" if context else question


_NAMES = ("Ana", "Ben", "Caro", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kit", "Lea")
_THINGS = (("cat", "dog", "fish"), ("bicycle", "car", "boat"), ("violin", "drum", "flute"))


def _puzzle(rng: random.Random) -> str:
    """A three-person logic puzzle with one solution, names and objects drawn by seed."""
    a, b, c = rng.sample(_NAMES, 3)
    x, y, z = rng.choice(_THINGS)
    # Solution: a owns y, b owns x, c owns z; the clues below pin exactly that down.
    return (
        f"Three friends, {a}, {b} and {c}, each own one {x}, {y} or {z}, one each. "
        f"{a} does not own the {x} or the {z}. {c} does not own the {x}. "
        f"Who owns which? Explain your reasoning step by step, then give the answer."
    )


# -- the agent loop ---------------------------------------------------------------------

LOOP_STEP = (
    "Step {step} of {steps}. Take your previous answer as the current state of the plan. "
    "Improve it: fix one weakness, then restate the whole plan in about {words} words."
)


def follow_up(
    spec: PromptSpec, messages: list[dict[str, Any]], answer: str, step: int, steps: int
) -> list[dict[str, Any]]:
    """The next request of an agent loop: the conversation so far, fed the last answer."""
    text = LOOP_STEP.format(step=step + 1, steps=steps, words=f"{_words(spec):,}")
    return [
        *messages,
        {"role": "assistant", "content": answer or "(no answer)"},
        {"role": "user", "content": text},
    ]
