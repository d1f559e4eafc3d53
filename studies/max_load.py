"""The max-load search and what a sweep reads off its curve: the knee, the limiting SLO.

Small state machines and pure functions, no I/O: the sweep feeds them trial
verdicts and latencies and records what they return.

- **Max-load search** (:class:`MaxSearch`): the bookkeeping of MLPerf's server
  scenario: grow the load until an SLO fails, bisect between the last pass and
  the first fail, confirm the result with a final, longer run.
- **Knee**: where a latency-vs-load curve turns from flat to steep (Kneedle).
- **Limiting SLO**: which SLO stopped the load from rising.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from slogate.analysis.documents.contracts import SloEntry

E = TypeVar("E", bound="SloEntry")


# -- the max-load search ------------------------------------------------------------
@dataclass(frozen=True)
class Trial:
    """One run of the search: the load it offered and whether every SLO passed."""

    value: float
    passed: bool
    confirmation: bool = False


@dataclass(frozen=True)
class NextTrial:
    value: float
    confirmation: bool


@dataclass
class MaxSearch:
    """Highest load at which every SLO passes, as MLPerf's server scenario finds it.

    From ``start`` the load doubles (``growth``) until a trial fails, or halves
    until one passes; then the interval between the highest pass and the lowest
    fail above it is bisected until it is narrower than ``tolerance`` x the pass
    (or, for integer loads such as users, adjacent). The highest pass is then
    run again as a confirmation; if that fails it counts as a fail and the search
    goes on below it. ``floor`` and ``ceiling`` bound the search: no pass at the
    floor means there is no max, a pass at the ceiling is reported as the max.
    """

    start: float
    integer: bool = False
    tolerance: float = 0.1
    growth: float = 2.0
    floor: float | None = None
    ceiling: float | None = None
    trials: list[Trial] = field(default_factory=list)
    # The floor searched to: ``floor``, else 1 for integer loads, start / 64 for others.
    _least: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.start > 0:
            raise ValueError(f"the search must start above 0, got {self.start}")
        if not 0 < self.tolerance < 1:
            raise ValueError(f"tolerance must lie in (0, 1), got {self.tolerance}")
        if not self.growth > 1:
            raise ValueError(f"growth must be above 1, got {self.growth}")
        default = 1.0 if self.integer else self.start / 64
        self._least = default if self.floor is None else self.floor
        if self.ceiling is not None and self.ceiling < self._least:
            raise ValueError(f"ceiling {self.ceiling} lies below floor {self._least}")
        self.start = self._clamp(self.start)

    def record(self, value: float, passed: bool, confirmation: bool = False) -> None:
        self.trials.append(Trial(value, passed, confirmation))

    @property
    def highest_pass(self) -> float | None:
        """The highest load that passed and is below every failure."""
        lowest_fail = self.lowest_fail
        passes = [
            t.value
            for t in self.trials
            if self._passed(t.value) and (lowest_fail is None or t.value < lowest_fail)
        ]
        return max(passes, default=None)

    @property
    def lowest_fail(self) -> float | None:
        return min((t.value for t in self.trials if not self._passed(t.value)), default=None)

    @property
    def confirmed(self) -> bool:
        best = self.highest_pass
        return best is not None and any(
            t.confirmation and t.passed and t.value == best for t in self.trials
        )

    @property
    def result(self) -> float | None:
        """The max load once confirmed; None while searching or when none passes."""
        return self.highest_pass if self.confirmed else None

    def next(self) -> NextTrial | None:
        """The next trial to run, or None when the search is over."""
        if not self.trials:
            return NextTrial(self.start, False)
        lo, hi = self.highest_pass, self.lowest_fail
        if lo is None:
            assert hi is not None
            if hi <= self._least:
                return None
            return NextTrial(self._clamp(hi / self.growth), False)
        if hi is None:
            if self.ceiling is not None and lo >= self.ceiling:
                return self._confirm_or_stop(lo)
            return NextTrial(self._clamp(lo * self.growth), False)
        if self._narrow(lo, hi):
            return self._confirm_or_stop(lo)
        return NextTrial(self._midpoint(lo, hi), False)

    def _confirm_or_stop(self, value: float) -> NextTrial | None:
        return None if self.confirmed else NextTrial(value, True)

    def _passed(self, value: float) -> bool:
        """A load passes when every trial at it passed (a failed confirmation
        overrides the earlier pass)."""
        return all(t.passed for t in self.trials if t.value == value)

    def _narrow(self, lo: float, hi: float) -> bool:
        if self.integer:
            return hi - lo <= max(1.0, math.floor(self.tolerance * lo))
        return hi - lo <= self.tolerance * lo

    def _midpoint(self, lo: float, hi: float) -> float:
        mid = (lo + hi) / 2
        if self.integer:
            return float(math.floor(mid))
        return round(mid, 6)

    def _clamp(self, value: float) -> float:
        if self.integer:
            value = float(round(value))
        value = max(value, self._least)
        if self.ceiling is not None:
            value = min(value, self.ceiling)
        return value


# -- knee ------------------------------------------------------------------------------
KNEE_MIN_POINTS = 3
KNEE_MIN_DISTANCE = 0.1


def knee_index(xs: Sequence[float], ys: Sequence[float]) -> int | None:
    """Index of the knee of a convex, rising curve (latency vs load), by Kneedle.

    Both axes are scaled to 0..1; the knee is the point farthest below the
    diagonal (largest x - y): the last load before latency turns steep. A curve
    that stays near its diagonal (latency growing in proportion) or has fewer
    than three points has no knee: None.
    """
    if len(xs) != len(ys):
        raise ValueError(f"{len(xs)} x values for {len(ys)} y values")
    if len(xs) < KNEE_MIN_POINTS:
        return None
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    x_lo, x_hi = xs[order[0]], xs[order[-1]]
    y_lo, y_hi = min(ys), max(ys)
    if x_hi == x_lo or y_hi == y_lo:
        return None
    distance = {i: (xs[i] - x_lo) / (x_hi - x_lo) - (ys[i] - y_lo) / (y_hi - y_lo) for i in order}
    best = max(order, key=lambda i: distance[i])
    return best if distance[best] >= KNEE_MIN_DISTANCE else None


def limiting_slo(slo: Sequence[E]) -> E | None:
    """The SLO that limits a load: the deepest failure (lowest ``margin_pct``)
    among the failed ones, else the inconclusive one, else None."""
    for verdict in ("fail", "inconclusive"):
        hits = [s for s in slo if s.verdict == verdict]
        if hits:
            return min(hits, key=lambda s: s.margin_pct if s.margin_pct is not None else 0.0)
    return None
