"""Mergeable percentiles: fixed log-spaced histogram buckets, read the DDSketch way.

Every rollup row keeps, per metric, a sparse histogram {bucket index: count} over the same
fixed buckets, so any set of rows (hours into a day, days into 90 days, regions into
all) merges by adding counts, and percentiles of the merge are as exact as of the raw
samples up to the bucket width. Medians of medians would not be.

Bucket i holds [L·γ^i, L·γ^(i+1)) with γ = 10^(1/500) (0.46 % wide). A percentile that
falls in it reads as 2·L·γ^(i+1)/(γ+1), DDSketch's representative value (Masson, Rim,
Lee, VLDB 2019): within a relative error α = (γ−1)/(γ+1) = 0.23 % of every sample in the
bucket, whichever it was. (Until November 2026 buckets were 2.3 % wide and read from
their geometric middle, ±1.2 %: a 2,100 tok/s simulator read 2,113.) Where raw runs are
read, percentiles come from the exact values instead (dashboard.queries.aggregates.Agg).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

BUCKETS_PER_DECADE = 500
_LOG_STEP = 1 / BUCKETS_PER_DECADE
GAMMA = 10**_LOG_STEP
# The largest relative error of a percentile read from a bucket.
RELATIVE_ERROR = (GAMMA - 1) / (GAMMA + 1)
# Values within ±this of zero (0.01 ms, 0.01 tok/s) share bucket zero; nothing measured
# is that small, and the log scale needs a floor.
FLOOR = 0.01
_FLOOR_LOG = math.log10(FLOOR)

Histogram = dict[str, int]  # JSON object keys are strings


def bucket_of(value: float) -> int:
    """Positive values in buckets 0, 1, …; negative ones (a "saved %" where the second
    request was slower) mirrored into −1, −2, …, so that bucket order is value order."""
    if value < -FLOOR:
        return -1 - bucket_of(-value)
    if value <= FLOOR:
        return 0
    return int((math.log10(value) - _FLOOR_LOG) / _LOG_STEP)


def bucket_value(index: int) -> float:
    """The value a percentile in bucket `index` reads as: DDSketch's 2·upper/(γ+1),
    equally far (relatively) from both edges, so within RELATIVE_ERROR of any sample."""
    if index < 0:
        return -bucket_value(-1 - index)
    upper = 10 ** (_FLOOR_LOG + (index + 1) * _LOG_STEP)
    return 2 * upper / (GAMMA + 1)


def bucket_sql(value: str) -> str:
    """`bucket_of` in SQL, for the SQL expression `value` (float8). The constants come
    from this module, so the two can never drift apart; repr() of a float is exact."""
    log_index = f"floor((log({{v}}) - ({_FLOOR_LOG!r})::float8) / ({_LOG_STEP!r})::float8)::int"
    return (
        f"CASE WHEN {value} < -{FLOOR!r}::float8 THEN -1 - {log_index.format(v=f'-{value}')} "
        f"WHEN {value} <= {FLOOR!r}::float8 THEN 0 "
        f"ELSE {log_index.format(v=value)} END"
    )


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
