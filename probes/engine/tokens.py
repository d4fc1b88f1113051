"""Our own token count: OpenAI's o200k_base encoding, offline.

Counting happens after the stream (never in the read loop). ``bpe-openai`` ships the
encoding inside the wheel, so nothing is downloaded at run time. It refuses inputs of a
million characters or 200,000 tokens, so long texts are counted in segments cut just
before a space: o200k's pre-tokeniser starts a new piece there anyway, so the sum equals
the whole-text count.

``count_all_async`` yields to the event loop between segments: when several streams end
together, one stream's counting must not delay the timestamps of the others.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

SEGMENT_CHARS = 20_000
_lock = threading.Lock()
_encoding: Any = None


def encoding() -> Any:
    global _encoding
    if _encoding is None:
        with _lock:
            if _encoding is None:
                import bpe_openai

                _encoding = bpe_openai.get_encoding("o200k_base")
    return _encoding


def _segments(text: str) -> Iterator[str]:
    start, n = 0, len(text)
    while n - start > SEGMENT_CHARS:
        cut = text.rfind(" ", start + 1, start + SEGMENT_CHARS)
        if cut <= start:
            cut = start + SEGMENT_CHARS  # no space at all: cut anywhere
        yield text[start:cut]
        start = cut
    yield text[start:]


def count(text: str | None) -> int:
    """o200k_base tokens in ``text``; special-token strings count as ordinary text."""
    if not text:
        return 0
    encode = encoding().encode_ordinary
    if len(text) <= SEGMENT_CHARS:
        return len(encode(text))
    return sum(len(encode(s)) for s in _segments(text))


def count_each(pieces: Sequence[str | None]) -> list[int]:
    encode = encoding().encode_ordinary
    return [(len(encode(p)) if len(p) <= SEGMENT_CHARS else count(p)) if p else 0 for p in pieces]


@dataclass
class Counts:
    """o200k counts of one stream: per timeline entry, and per channel (whole text)."""

    per_entry: list[int]
    answer: int
    reasoning: int
    tool: int


def count_all(pieces: Sequence[str | None], answer: str, reasoning: str, tool: str) -> Counts:
    return Counts(count_each(pieces), count(answer), count(reasoning), count(tool))


async def count_all_async(
    pieces: Sequence[str | None], answer: str, reasoning: str, tool: str, slice_size: int = 256
) -> Counts:
    """``count_all``, yielding to the loop every ``slice_size`` entries or segment."""
    per_entry: list[int] = []
    for i in range(0, len(pieces), slice_size):
        per_entry += count_each(pieces[i : i + slice_size])
        await asyncio.sleep(0)
    totals = []
    for text in (answer, reasoning, tool):
        total = 0
        for segment in _segments(text) if text else ():
            total += count(segment)
            await asyncio.sleep(0)
        totals.append(total)
    return Counts(per_entry, *totals)
