"""Percentiles of an HDR histogram with order-statistic confidence intervals.

A p99 from 50 samples is a guess; a verdict must know how good a guess. For a
quantile q estimated from n samples, the number of samples below the true
quantile is Binomial(n, q), so the interval between the order statistics of
ranks ``binom.ppf(a/2, n, q)`` and ``binom.ppf(1 - a/2, n, q) + 1`` holds the
true quantile with probability at least 1 - a, whatever the distribution.
When the upper rank would exceed n, too few samples lie beyond the percentile
to bound it: the estimate is marked not estimable and a verdict on it is
INCONCLUSIVE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from hdrh.histogram import HdrHistogram

from slogate.analysis.measurement.histograms import Recorded, recorded

CONFIDENCE = 0.95
STANDARD_PERCENTILES: dict[str, float] = {
    "p50": 50.0,
    "p90": 90.0,
    "p95": 95.0,
    "p99": 99.0,
    "p999": 99.9,
}


@dataclass(frozen=True, slots=True)
class Estimate:
    """A percentile's point value and its confidence interval, in the histogram's unit."""

    value: float
    lower: float | None
    upper: float | None
    count: int

    @property
    def bounded(self) -> bool:
        return self.lower is not None and self.upper is not None


def rank_interval(n: int, quantile: float, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """1-based ranks (lower, upper) of the order statistics bounding the quantile.

    The lower rank may be 0 and the upper rank n + 1: the interval is then open
    on that side.
    """
    alpha = 1.0 - confidence
    lower = binomial_quantile(alpha / 2, n, quantile)
    upper = binomial_quantile(1 - alpha / 2, n, quantile) + 1
    return lower, upper


def binomial_quantile(q: float, n: int, p: float) -> int:
    """The smallest k with P(Binomial(n, p) <= k) >= q (``scipy.stats.binom.ppf``).

    From ``scipy.special`` (its inverse as a first guess, then the CDF decides):
    ``scipy.stats`` would cost the judging process about 60 MB more, held
    through the run once the live verdict needs it (BENCHMARKS.md)."""
    from scipy.special import bdtr, bdtrik

    guess = bdtrik(q, n, p)
    k = min(max(math.ceil(guess), 0), n) if math.isfinite(guess) else 0
    while k > 0 and bdtr(k - 1, n, p) >= q:
        k -= 1
    while k < n and bdtr(k, n, p) < q:
        k += 1
    return k


@lru_cache(maxsize=64)
def min_samples(quantile: float, confidence: float = CONFIDENCE) -> int:
    """Fewest samples whose confidence interval for ``quantile`` is closed on both sides."""
    n = 1
    while True:
        lower, upper = rank_interval(n, quantile, confidence)
        if lower >= 1 and upper <= n:
            break
        n *= 2
    low, high = n // 2, n
    while high - low > 1:
        mid = (low + high) // 2
        lower, upper = rank_interval(mid, quantile, confidence)
        if lower >= 1 and upper <= mid:
            high = mid
        else:
            low = mid
    return high


def estimate(histogram: HdrHistogram | Recorded, percentile: float) -> Estimate:
    view = histogram if isinstance(histogram, Recorded) else recorded(histogram)
    n = view.total
    if n == 0:
        return Estimate(value=0.0, lower=None, upper=None, count=0)
    value = float(view.value_at_percentile(percentile))
    lower_rank, upper_rank = rank_interval(n, percentile / 100.0)
    lower = float(view.value_at_rank(lower_rank)) if lower_rank >= 1 else None
    upper = float(view.value_at_rank(upper_rank)) if upper_rank <= n else None
    return Estimate(value=value, lower=lower, upper=upper, count=n)


@dataclass(frozen=True, slots=True)
class Distribution:
    """The standard summary of one metric: count, percentiles with bounds, max, mean."""

    count: int
    percentiles: dict[str, Estimate]
    max: float
    mean: float
    min: float


def summarize(histogram: HdrHistogram) -> Distribution:
    view = recorded(histogram)
    n = view.total
    return Distribution(
        count=n,
        percentiles={key: estimate(view, p) for key, p in STANDARD_PERCENTILES.items()},
        max=float(histogram.get_max_value()) if n else 0.0,
        mean=view.mean(),
        min=float(histogram.get_min_value()) if n else 0.0,
    )
