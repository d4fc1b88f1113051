"""Secrets out of every string we keep: scrubbed first, cut after.

A provider or a proxy may echo a key anywhere: whole, upper-cased, URL-encoded, in base64
(inside a Basic header it echoes back), split over two fields, or already cut by us to a
column's length. Matching the whole key finds none of those; a 53-character key stored
as its first 39 characters is still a key. So a ``Scrubber`` knows every run of
``MIN_RUN`` characters of each secret's forms (the key, its URL encodings, its base64 at
each of the three byte alignments, standard and URL-safe alphabets) and replaces every
stretch of text that is covered by such runs, ASCII case folded. Any piece of 12 or more
characters of a key (a prefix left by a cut, half of a split) is found; a shorter secret
is matched whole.

The cut comes after: ``cut`` scrubs with the scrubber in force for this context (set by
the engine for its request's own key and headers, and by the recorder for every live
secret) before it truncates, and the engine's cuts (``http_errors.short``,
``sanitize.clean_text``) go through it.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote, quote_plus

REDACTED = "[redacted]"
MIN_RUN = 12  # characters: a piece of a key this long is taken for the key
_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _base64_forms(secret: bytes) -> Iterator[str]:
    """The base64 characters that spell ``secret`` whatever precedes it: at each of the
    three alignments, without the characters that also carry a neighbour's bits."""
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret).decode()
        whole = (shift + len(secret)) // 3 * 4  # characters of complete groups only
        middle = encoded[(0, 2, 3)[shift] : whole]
        yield middle
        yield middle.translate(str.maketrans("+/", "-_"))


def forms(secret: str) -> set[str]:
    """Every spelling of ``secret`` we look for (case is folded when matching)."""
    found = {secret, quote(secret, safe=""), quote_plus(secret), quote(secret)}
    found.update(_base64_forms(secret.encode()))
    return {f for f in found if f}


class Scrubber:
    """Replaces every live secret, or a 12-character piece of one, in strings and JSON."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self.runs: set[str] = set()
        self.short: set[str] = set()  # secrets (or forms) below MIN_RUN: matched whole
        for secret in {s for s in secrets if s}:
            for form in forms(secret):
                folded = form.translate(_FOLD)
                if len(folded) < MIN_RUN:
                    if form == secret:
                        self.short.add(folded)
                    continue
                self.runs.update(folded[i : i + MIN_RUN] for i in range(len(folded) - 11))

    def __bool__(self) -> bool:
        return bool(self.runs or self.short)

    def text(self, text: str) -> str:
        if not self or not text:
            return text
        folded = text.translate(_FOLD)
        covered = [False] * len(text)
        runs = self.runs
        for i in range(len(folded) - MIN_RUN + 1):
            if folded[i : i + MIN_RUN] in runs:
                covered[i : i + MIN_RUN] = [True] * MIN_RUN
        for secret in self.short:
            start = folded.find(secret)
            while start != -1:
                covered[start : start + len(secret)] = [True] * len(secret)
                start = folded.find(secret, start + 1)
        if not any(covered):
            return text
        out, i = [], 0
        while i < len(text):
            if covered[i]:
                out.append(REDACTED)
                while i < len(text) and covered[i]:
                    i += 1
            else:
                j = i
                while j < len(text) and not covered[j]:
                    j += 1
                out.append(text[i:j])
                i = j
        return "".join(out)

    def value(self, value: Any) -> Any:
        """``value`` scrubbed in object keys as in values, at any depth (a proxy echoing
        the key as a usage key or as finish_reason hides it there)."""
        if not self:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value


NOTHING = Scrubber(())
_current: contextvars.ContextVar[Scrubber] = contextvars.ContextVar("scrubber", default=NOTHING)


def current() -> Scrubber:
    return _current.get()


@contextlib.contextmanager
def using(scrubber: Scrubber) -> Iterator[Scrubber]:
    """Every ``cut`` in this context (and the tasks it starts) scrubs with ``scrubber``
    too, beside the one already in force."""
    outer = _current.get()
    if outer:
        merged = Scrubber(())
        merged.runs, merged.short = outer.runs | scrubber.runs, outer.short | scrubber.short
        scrubber = merged
    token = _current.set(scrubber)
    try:
        yield scrubber
    finally:
        _current.reset(token)


def cut(text: str, limit: int) -> str:
    """``text`` scrubbed of this context's secrets, then at most ``limit`` characters."""
    text = _current.get().text(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"
