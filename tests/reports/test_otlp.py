"""A run's HDR histograms as OTel exponential histograms (``--otlp-endpoint``):
every sample counted, in a bucket whose bounds hold it, as fine as 160
buckets allow."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slogate.analysis.measurement.histograms import HistogramSet
from slogate.reports.otlp import MAX_BUCKETS, exponential_point

US = 1_000_000


def histogram_of(values_us: list[int]):
    hs = HistogramSet()
    for value in values_us:
        hs.record_us("ttft", value)
    return hs.histogram("ttft")


def bucket_bounds(scale: int, offset: int, index: int) -> tuple[float, float]:
    base = 2.0 ** (2.0**-scale)
    return base ** (offset + index), base ** (offset + index + 1)


@pytest.mark.parametrize(
    "values_us",
    [
        [1500, 1500, 2300, 80_000, 80_100, 2_000_000],  # 1.5 ms to 2 s
        [0, 1, 3, 3_600_000_000],  # the whole range: a coarse scale, zeros apart
        [250_000] * 7,  # one value
    ],
)
def test_every_hdr_sample_lands_in_the_exponential_bucket_that_holds_it(values_us) -> None:
    point = exponential_point(histogram_of(values_us), {"k": "v"}, 1, 2)
    assert point.count == len(values_us)
    assert point.zero_count == values_us.count(0)
    assert sum(point.positive.bucket_counts) + point.zero_count == len(values_us)
    assert len(point.positive.bucket_counts) <= MAX_BUCKETS
    # each positive value, in order, is counted in a bucket whose bounds hold
    # it, to HDR's 3 digits (a value is its HDR bucket's middle)
    bounds = [
        bucket_bounds(point.scale, point.positive.offset, i)
        for i, count in enumerate(point.positive.bucket_counts)
        for _ in range(count)
    ]
    for value, (lower, upper) in zip(sorted(v for v in values_us if v), bounds, strict=True):
        assert lower * (1 - 1e-3) < value / US <= upper * (1 + 1e-3)
    assert point.sum == pytest.approx(sum(values_us) / US, rel=1e-3)
    assert point.min == pytest.approx(min(values_us) / US, rel=1e-3, abs=1e-6)
    assert point.max == pytest.approx(max(values_us) / US, rel=1e-3)


def test_a_run_of_usual_spread_gets_buckets_a_few_percent_wide() -> None:
    rng = np.random.default_rng(3)
    values = [int(v) for v in rng.lognormal(math.log(200_000), 0.5, 2000)]  # TTFT around 200 ms
    point = exponential_point(histogram_of(values), {}, 1, 2)
    assert point.scale >= 4  # a bucket at most 2**(1/16) - 1 = 4.4% wide
    assert point.count == 2000
