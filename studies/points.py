"""Controlled experiments and sweeps: runs pooled into points, and the trends between them.

A *point* is one setting of the varied factor (a prompt length, a rate, a
weight precision); its runs (the repeats) are pooled exactly by merging their
histograms, so its p99 is the p99 of every request measured at that setting,
not an average of p99s. A *trend* states how a metric moves along the points
(rises, falls, stays flat) with the numbers that say so, and whether that is
what the physics of prefill and decode leads one to expect.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.documents.summary import distribution, request_counts, throughput_block
from slogate.analysis.measurement.recorder import Bucket
from slogate.scenarios.metrics import E2E, ITL, TPOT, TTFT

POINT_METRICS = (TTFT.name, TPOT.name, ITL.name, E2E.name)
FLAT_WITHIN = 0.15
MIN_RANK_CORRELATION = 0.8
RISES, FALLS, FLAT, MIXED = "rises", "falls", "flat", "mixed"


def pool(runs: Sequence[RunData]) -> tuple[Bucket, float]:
    """Every scenario's measured bucket of every run merged into one, and the
    runs' measured seconds added up (so rates are totals over total time)."""
    bucket = Bucket()
    seconds = 0.0
    for run in runs:
        for name in run.scenario_names():
            bucket.add(run.overall(name))
        seconds += float(run.meta.get("measured_s") or 0.0)
    return bucket, seconds


def point_block(runs: Sequence[RunData]) -> dict[str, Any]:
    """The pooled numbers of one point: requests, latency distributions (ms), throughput."""
    bucket, seconds = pool(runs)
    requests = request_counts(bucket.counters)
    return {
        "requests": requests,
        "metrics": {
            f"{name}_ms": distribution(bucket.histograms.histogram(name)) for name in POINT_METRICS
        },
        "throughput": throughput_block(bucket.counters, seconds or None),
    }


def value_at(block: Mapping[str, Any], path: Sequence[str]) -> Any:
    """The value inside nested mappings (``("metrics", "ttft_ms", "p99")``), None if absent."""
    value: Any = block
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def lookup(block: Mapping[str, Any], path: Sequence[str]) -> float | None:
    """:func:`value_at` as a number, for plots and trends."""
    value = value_at(block, path)
    return None if value is None else float(value)


@dataclass(frozen=True)
class Expectation:
    """What prefill/decode physics leads one to expect: ``path`` (into a point block) moves in
    ``direction`` as the factor grows."""

    claim: str
    path: tuple[str, ...]
    direction: str


@dataclass(frozen=True)
class Trend:
    """How a metric moved along the points, and whether that met the expectation."""

    claim: str
    metric: str
    expected: str
    observed: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    ratio: float | None
    spread: float | None
    rank_correlation: float | None

    @property
    def holds(self) -> bool:
        return self.observed == self.expected

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "metric": self.metric,
            "expected": self.expected,
            "observed": self.observed,
            "holds": self.holds,
            "xs": list(self.xs),
            "ys": list(self.ys),
            "ratio_last_to_first": self.ratio,
            "spread_max_to_min": self.spread,
            "rank_correlation": self.rank_correlation,
        }

    def describe(self) -> str:
        numbers = ", ".join(f"{x:g}: {y:.4g}" for x, y in zip(self.xs, self.ys, strict=True))
        mark = "as expected" if self.holds else f"NOT as expected ({self.expected})"
        rho = "n/a" if self.rank_correlation is None else f"{self.rank_correlation:.2f}"
        ratio = "n/a" if self.ratio is None else f"x{self.ratio:.3g}"
        return (
            f"{self.claim}: {self.metric} {self.observed} ({numbers}; last/first {ratio}, "
            f"rank correlation {rho}) - {mark}"
        )


def direction(
    ys: Sequence[float], xs: Sequence[float], flat_within: float = FLAT_WITHIN
) -> tuple[str, float | None, float | None, float | None]:
    """(direction, last/first, max/min, Spearman's rho) of ``ys`` along ``xs``.

    Flat when the largest value is within ``flat_within`` of the smallest;
    otherwise rises (falls) when the ranks agree (disagree) at 0.8 or more and
    the last value is above (below) the first; else mixed."""
    if len(ys) < 2 or min(ys) <= 0:
        return MIXED, None, None, None
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    first, last = ys[order[0]], ys[order[-1]]
    ratio, spread = last / first, max(ys) / min(ys)
    from scipy.stats import (
        spearmanr,  # imported here: scipy.stats costs every load process about 70 MB
    )

    correlation = float(spearmanr(xs, ys).statistic) if len(set(ys)) > 1 else 0.0
    rho = None if math.isnan(correlation) else correlation
    if spread - 1 <= flat_within:
        return FLAT, ratio, spread, rho
    if rho is not None and rho >= MIN_RANK_CORRELATION and ratio > 1:
        return RISES, ratio, spread, rho
    if rho is not None and rho <= -MIN_RANK_CORRELATION and ratio < 1:
        return FALLS, ratio, spread, rho
    return MIXED, ratio, spread, rho


def trend(expectation: Expectation, points: Sequence[Mapping[str, Any]]) -> Trend:
    """The expectation checked on points that carry ``x`` and the block ``path`` reads."""
    pairs = [(float(p["x"]), lookup(p, expectation.path)) for p in points]
    known = [(x, y) for x, y in pairs if y is not None]
    xs, ys = tuple(x for x, _ in known), tuple(y for _, y in known)
    observed, ratio, spread, rho = direction(ys, xs)
    return Trend(
        expectation.claim,
        ".".join(expectation.path),
        expectation.direction,
        observed,
        xs,
        ys,
        ratio,
        spread,
        rho,
    )


# What prefill/decode physics leads one to expect of each controlled experiment.
EXPECTATIONS: dict[str, tuple[Expectation, ...]] = {
    "prompt-length": (
        Expectation(
            "TTFT grows with prompt length (prefill)", ("metrics", TTFT.key, "mean"), RISES
        ),
    ),
    "output-length": (
        Expectation(
            "TPOT stays stable as output grows (decode)", ("metrics", TPOT.key, "mean"), FLAT
        ),
    ),
    "concurrency": (
        Expectation(
            "total throughput rises with concurrency",
            ("throughput", "output_tokens_per_s"),
            RISES,
        ),
        Expectation(
            "per-request latency rises with concurrency", ("metrics", E2E.key, "mean"), RISES
        ),
    ),
    "precision": (
        Expectation("weight memory shrinks with fewer bytes per weight", ("weight_bytes",), RISES),
        Expectation(
            "decode gets faster with fewer bytes per weight (TPOT falls)",
            ("metrics", TPOT.key, "mean"),
            RISES,
        ),
    ),
}
