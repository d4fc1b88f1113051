import math
import random

import pytest

from dashboard import histogram

# Half a bucket's width: the most a percentile read from a bucket can be off by.
HALF_BUCKET = 10 ** (1 / (2 * histogram.BUCKETS_PER_DECADE)) - 1


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


def test_tiny_values_fall_into_the_first_bucket_instead_of_a_negative_index():
    assert histogram.bucket_of(0) == 0
    assert histogram.bucket_of(-5) == 0
    assert histogram.build([0.0, 0.001])["0"] == 2
