import importlib
import math
import random

import pytest

from dashboard import histogram
from dashboard.queries.aggregates import Agg

# The most a percentile read from a bucket can be off by (DDSketch's alpha).
HALF_BUCKET = histogram.RELATIVE_ERROR


def exact_percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


@pytest.mark.parametrize("q", [5, 25, 50, 75, 95])
def test_percentiles_match_the_raw_samples_within_half_a_bucket(q):
    rng = random.Random(q)
    values = [rng.lognormvariate(math.log(400), 0.4) for _ in range(5000)]

    estimate = histogram.percentile(histogram.build(values), q)

    assert estimate == pytest.approx(exact_percentile(values, q), rel=HALF_BUCKET)


def test_merged_histograms_give_the_percentile_of_all_samples_not_a_median_of_medians():
    fast = [2000.0 + i for i in range(100)]
    slow = [100.0 + i for i in range(300)]
    merged = histogram.merge([histogram.build(fast), histogram.build(slow)])

    median = histogram.percentile(merged, 50)

    assert median == pytest.approx(exact_percentile(fast + slow, 50), rel=HALF_BUCKET)
    # The median of the two medians would be ~1,100: far from the truth.
    assert median < 400


def test_nulls_are_skipped_and_an_empty_histogram_has_no_percentile():
    assert histogram.build([None, None]) == {}
    assert histogram.percentile({}, 50) is None


def test_tiny_values_fall_into_the_first_bucket():
    assert histogram.bucket_of(0) == 0
    assert histogram.bucket_of(-0.005) == 0
    assert histogram.build([0.0, 0.001, -0.01])["0"] == 3


def test_negative_values_mirror_the_positive_buckets_in_value_order():
    # A "saved %" is negative when the repeat was slower: its percentiles must still read.
    values = [-40.0, -5.0, -0.5, 0.0, 3.0, 60.0]
    indexes = [histogram.bucket_of(v) for v in values]
    assert indexes == sorted(indexes) and indexes[2] < 0 < indexes[4]
    for v in values:
        read = histogram.percentile(histogram.build([v]), 50)
        assert read == pytest.approx(v, rel=histogram.RELATIVE_ERROR, abs=histogram.FLOOR * 1.01)
    assert histogram.percentile(histogram.build(values), 50) == pytest.approx(-0.5, rel=0.005)


def test_the_relative_error_is_stated_and_at_most_half_a_percent():
    assert histogram.RELATIVE_ERROR <= 0.005
    assert pytest.approx(0.0023, abs=0.0001) == histogram.RELATIVE_ERROR


@pytest.mark.parametrize("seed", range(5))
def test_any_single_value_reads_back_within_the_stated_error(seed):
    rng = random.Random(seed)
    for _ in range(2000):
        value = 10 ** rng.uniform(-1, 6)
        read = histogram.percentile(histogram.build([value]), 50)
        assert abs(read - value) / value <= histogram.RELATIVE_ERROR * (1 + 1e-9)


def test_a_2100_tok_s_simulator_reads_2100_not_2113():
    runs = [2100.0, 2101.2, 2102.5, 2103.0]
    median = histogram.percentile(histogram.build(runs), 50)
    assert round(median / 2100, 2) == 1.00  # "measured 100 %", not 101 %
    assert 2100 * (1 - histogram.RELATIVE_ERROR) <= median <= 2103 * (1 + histogram.RELATIVE_ERROR)


def test_stored_histograms_are_reindexed_to_the_finer_buckets():
    migration = importlib.import_module("dashboard.migrations.0004_histograms_ddsketch_buckets")
    old = {"532": 3}  # 100 buckets per decade: [2089, 2138), read as 2,113
    ((key, n),) = migration._reindex(old, 1 / 100, 1 / 500).items()
    assert n == 3
    assert histogram.bucket_value(int(key)) == pytest.approx(2113.5, rel=histogram.RELATIVE_ERROR)


def test_raw_runs_give_exact_percentiles_and_rollups_bucketed_ones():
    raw = Agg()
    for value in (81.2, 83.0, 86.4):
        raw.add_value("ttft_ms", value)
    assert raw.percentile("ttft_ms", 50) == 83.0  # exact: a run's own value
    rolled = Agg()
    rolled.add_hist("ttft_ms", histogram.build([81.2, 83.0, 86.4]))
    rolled.merge(raw)
    assert rolled.percentile("ttft_ms", 50) == pytest.approx(83.0, rel=histogram.RELATIVE_ERROR)
    assert rolled.percentile("ttft_ms", 50) != 83.0
