"""Prometheus text exposition (format 0.0.4), written directly.

prometheus_client builds an object per sample; a scrape of 100 endpoints × 11 workloads
× 3 regions holds about half a million histogram samples, which that takes seconds to
write. Here each series' label string is escaped once, every sample is one f-string and
every histogram's bucket lines one %-format of a template.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import accumulate

from isal import igzip

from dashboard import prom_buckets

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Where a series' `name_bucket{labels,le=` goes in a bucket template (Postgres text never
# holds a NUL, so no label can contain it).
_PREFIX = "\x00"
# inverse → every `_bucket` line of one series as one %-template: the prefix, then per
# edge `"le"} %d`. One str.replace and one C-level % per series instead of a Python
# f-string per bucket: the latency histograms' 85 buckets made that most of a scrape.
_BUCKET_TEMPLATES = {
    inverse: "\n".join(
        f'{_PREFIX}"{label}"}} %d'
        for label in [*(prom_buckets.edge_label(e) for e in edges), "+Inf"]
    )
    for inverse, edges in prom_buckets.EDGES.items()
}
_BUCKET_COUNTS = {inverse: len(edges) + 1 for inverse, edges in prom_buckets.EDGES.items()}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def labels(names: Sequence[str], values: Iterable[object]) -> str:
    """`a="1",b="2"`: the inside of a sample's braces."""
    return ",".join(f'{n}="{_escape(str(v))}"' for n, v in zip(names, values, strict=True))


def number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


class Exposition:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        help_text = help_text.replace("\\", "\\\\").replace("\n", "\\n")
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, label_text: str, value: float) -> None:
        self.lines.append(f"{name}{{{label_text}}} {number(value)}")

    def histogram(
        self, name: str, label_text: str, counts: list[int], total: float, inverse: bool
    ) -> None:
        """One series: cumulative `_bucket`s over its edges (prom_buckets.EDGES[inverse])
        and +Inf, `_sum`, `_count`."""
        cumulative = tuple(accumulate(counts))
        template = _BUCKET_TEMPLATES[inverse]
        if len(cumulative) != _BUCKET_COUNTS[inverse]:
            raise ValueError(f"{name}: {len(cumulative)} bucket counts for another layout")
        # A '%' in a label value is text, not a conversion.
        bucket = f"{name}_bucket{{{label_text},le=".replace("%", "%%")
        self.lines.append(template.replace(_PREFIX, bucket) % cumulative)
        self.lines.append(f"{name}_sum{{{label_text}}} {total!r}")
        self.lines.append(f"{name}_count{{{label_text}}} {cumulative[-1]}")

    def body(self) -> bytes:
        self.lines.append("")
        return "\n".join(self.lines).encode()


def compressed(body: bytes, accept_encoding: str) -> bytes | None:
    """gzip when the scraper accepts it (Prometheus always does): the text of thousands
    of histograms shrinks about fortyfold. ISA-L's gzip (isal) at level 1: the same
    format and about the same size as zlib's level 1, in a sixth of its CPU time (zlib took
    ~0.8 s of a 3,300-series scrape)."""
    encodings = {part.split(";")[0].strip().lower() for part in accept_encoding.split(",")}
    if "gzip" not in encodings:
        return None
    return igzip.compress(body, compresslevel=1, mtime=0)
