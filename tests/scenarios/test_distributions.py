"""Length distributions draw what they declare (10,000 samples each)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slogate.scenarios.distributions import (
    Z90,
    Empirical,
    Exponential,
    Fixed,
    Gamma,
    LogNormal,
    Normal,
    Uniform,
)
from slogate.scenarios.units import parse_duration

N = 10_000


def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


def test_z90_is_the_normal_quantile():
    from scipy import stats  # here, not at the top: seconds of collection on every worker

    assert stats.norm.ppf(0.9) == pytest.approx(Z90, abs=1e-12)


def test_lognormal_median_and_p90():
    d = LogNormal(median=1020, p90=2735)
    x = d.sample(rng(), N)
    assert np.median(x) == pytest.approx(1020, rel=0.05)
    assert np.percentile(x, 90) == pytest.approx(2735, rel=0.05)


def test_lognormal_clamps():
    x = LogNormal(median=100, p90=1000, min=50, max=300).sample_int(rng(), N)
    assert x.min() == 50 and x.max() == 300
    assert 0.2 < np.mean(x == 300) < 0.4  # P(X > 300) = 1 - Phi(ln 3 / sigma) = 0.30


def test_normal_mean_std_and_floor():
    x = Normal(mean=500, std=100, min=1).sample(rng(), N)
    assert x.mean() == pytest.approx(500, rel=0.02) and x.std() == pytest.approx(100, rel=0.03)
    assert Normal(mean=0, std=10, min=1).sample_int(rng(), N).min() == 1


def test_gamma_mean_and_cv():
    x = Gamma(mean=200, cv=1.5).sample(rng(), N)
    assert x.mean() == pytest.approx(200, rel=0.05)
    assert x.std() / x.mean() == pytest.approx(1.5, rel=0.07)


def test_exponential_mean():
    x = Exponential(mean=3.0, min=0).sample(rng(), N)
    assert x.mean() == pytest.approx(3.0, rel=0.03) and x.min() >= 0


def test_uniform_integers_are_equally_likely():
    x = Uniform(min=1, max=4).sample_int(rng(), N)
    counts = np.bincount(x, minlength=5)[1:]
    assert counts.sum() == N and counts.min() > 0.23 * N and counts.max() < 0.27 * N
    from scipy import stats

    assert stats.chisquare(counts).pvalue > 0.001


def test_uniform_floats_cover_the_range():
    x = Uniform(min=2.0, max=6.0).sample(rng(), N)
    assert x.min() >= 2.0 and x.max() <= 6.0
    assert x.mean() == pytest.approx(4.0, rel=0.02)


def test_fixed():
    assert set(Fixed(value=128, min=1).sample_int(rng(), 100)) == {128}
    assert Fixed(value=128, min=1).lower == Fixed(value=128).upper == 128


def test_empirical_reproduces_the_source():
    source = np.random.default_rng(7).lognormal(6, 1, 50_000).round()
    x = Empirical(source="test", values=source, min=1).sample_int(rng(), N)
    for q in (50, 90, 99):
        assert np.percentile(x, q) == pytest.approx(np.percentile(source, q), rel=0.06)
    assert set(np.unique(x)) <= set(np.unique(source))


def test_bounds():
    assert LogNormal(median=1, p90=2).upper == math.inf
    assert LogNormal(median=1, p90=2, max=9).upper == 9
    assert Empirical(source="t", values=np.array([3.0, 8.0]), max=5).upper == 5
    assert Empirical(source="t", values=np.array([3.0, 8.0]), min=1).lower == 3


def test_same_generator_state_gives_same_draws():
    d = LogNormal(median=100, p90=300)
    assert np.array_equal(d.sample_int(rng(), 50), d.sample_int(rng(), 50))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30),
        ("5m", 300),
        ("1h", 3600),
        ("1m30s", 90),
        ("2.5s", 2.5),
        (12, 12.0),
        ("7", 7.0),
        (0, 0.0),
    ],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["5 minutes", "-3s", "s", "", "1x", True, None, [1], "30s5"])
def test_bad_durations(text):
    with pytest.raises(ValueError, match="expected a duration"):
        parse_duration(text)
