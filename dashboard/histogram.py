"""Mergeable percentiles: fixed log-spaced histogram buckets.

Every rollup row keeps, per metric, a sparse histogram {bucket index: count} over the same
fixed buckets, so any set of rows (hours into a day, days into 90 days, regions into
all) merges by adding counts, and percentiles of the merge are as exact as of the raw
samples up to the bucket width. Medians of medians would not be.

Buckets grow by 10^(1/100) (2.33 %): a percentile read back from a bucket's geometric
middle is within ±1.2 % of the true sample value, tighter than run-to-run noise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

BUCKETS_PER_DECADE = 100
_LOG_STEP = 1 / BUCKETS_PER_DECADE
# Values below this (0.01 ms, 0.01 tok/s) share bucket zero's floor; nothing measured is
# that small, and it keeps indices non-negative.
FLOOR = 0.01
_FLOOR_LOG = math.log10(FLOOR)

Histogram = dict[str, int]  # JSON object keys are strings


def bucket_of(value: float) -> int:
    if value <= FLOOR:
        return 0
    return int((math.log10(value) - _FLOOR_LOG) / _LOG_STEP)


def bucket_value(index: int) -> float:
    """The geometric middle of a bucket: the value a percentile in it reads as."""
    return 10 ** (_FLOOR_LOG + (index + 0.5) * _LOG_STEP)


def build(values: Iterable[float | None]) -> Histogram:
    hist: dict[str, int] = {}
    for value in values:
        if value is None:
            continue
        key = str(bucket_of(value))
        hist[key] = hist.get(key, 0) + 1
    return hist


def merge(histograms: Iterable[Mapping[str, int] | None]) -> Histogram:
    total: dict[str, int] = {}
    for hist in histograms:
        for key, count in (hist or {}).items():
            total[key] = total.get(key, 0) + count
    return total


def count(hist: Mapping[str, int]) -> int:
    return sum(hist.values())


def percentile(hist: Mapping[str, int], q: float) -> float | None:
    """The q-th percentile (0–100), nearest-rank on buckets; None for an empty histogram."""
    n = count(hist)
    if n == 0:
        return None
    rank = max(1, math.ceil(q / 100 * n))
    seen = 0
    for index in sorted(int(k) for k in hist):
        seen += hist[str(index)]
        if seen >= rank:
            return bucket_value(index)
    raise AssertionError("unreachable: rank never exceeds the count")


def percentiles(hist: Mapping[str, int], qs: Iterable[float]) -> dict[float, float | None]:
    return {q: percentile(hist, q) for q in qs}
