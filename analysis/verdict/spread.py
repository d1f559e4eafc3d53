"""Repeats: one statistic measured by N identical runs, its spread, and the verdict it allows.

A run's p99 comes with an order-statistic interval over that run's own
requests; it says nothing of how far the next identical run would land (the
engine's caches, the host's other work, where the bursts fell). N identical
runs are a sample of the statistic itself: its mean, sample standard
deviation, coefficient of variation (sd / mean) and the two-sided Student-t
interval of the mean, mean ± t(1 - (1 - c) / 2, N - 1) · sd / √N, as AIPerf
reports its multi-run confidence (ai-dynamo/aiperf #623). One run gives no
spread.

The combined verdict of an SLO rests on that interval (docs/ci.md,
"Repeats"): it passes when the whole interval is within the limit, fails when
the whole interval is beyond it, and is inconclusive when the limit lies
inside it (the runs disagree by more than the margin), or when fewer than two
runs measured the statistic. Two repeat sets compare by the same intervals
(:func:`slogate.analysis.verdict.compare.classify`): a change inside them is no
regression.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from slogate.analysis.verdict.slo import Verdict

CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class Spread:
    """A statistic across runs: the runs' values (None: a run without it),
    and over those measured, their mean, sd, CV and the interval of the mean."""

    values: tuple[float | None, ...]
    mean: float | None
    sd: float | None
    cv: float | None
    lower: float | None
    upper: float | None
    confidence: float

    @property
    def n(self) -> int:
        return sum(v is not None for v in self.values)

    def to_dict(self) -> dict[str, object]:
        return {
            "values": list(self.values),
            "n": self.n,
            "mean": self.mean,
            "sd": self.sd,
            "cv": self.cv,
            "ci": [self.lower, self.upper],
            "confidence": self.confidence,
        }


def spread(values: Sequence[float | None], confidence: float = CONFIDENCE) -> Spread:
    """The spread of ``values`` (one per run, None where a run has none)."""
    known = [float(v) for v in values if v is not None]
    n = len(known)
    mean = sum(known) / n if n else None
    sd = cv = lower = upper = None
    if mean is not None and n >= 2:
        sd = math.sqrt(sum((v - mean) ** 2 for v in known) / (n - 1))
        cv = sd / mean if mean else None
        from scipy.special import stdtrit  # the Student-t quantile

        half = float(stdtrit(n - 1, 1 - (1 - confidence) / 2)) * sd / math.sqrt(n)
        lower, upper = mean - half, mean + half
    return Spread(tuple(values), mean, sd, cv, lower, upper, confidence)


def spread_verdict(s: Spread, kind: str, threshold: float) -> Verdict:
    """An SLO's verdict on its spread: ``kind`` "max" (the value must stay at or
    below ``threshold``) or "min" (at or above)."""
    if s.lower is None or s.upper is None:
        return Verdict.INCONCLUSIVE
    within, beyond = (
        (s.upper <= threshold, s.lower > threshold)
        if kind == "max"
        else (s.lower >= threshold, s.upper < threshold)
    )
    if within:
        return Verdict.PASS
    return Verdict.FAIL if beyond else Verdict.INCONCLUSIVE
