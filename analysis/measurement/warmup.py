"""The warm-up cut of ``--warmup auto``: where a run's latency settles, found by MSER.

MSER (White 1997, "An effective truncation heuristic for bias reduction in
simulation output", Simulation 69(6); MSER-5 in White, Cobb and Spratt 2000)
scores each truncation point d of a series Y_1..Y_n by the squared standard
error of the mean of what is left,

    MSER(d) = sum over i > d of (Y_i - mean(Y_d+1..Y_n))^2 / (n - d)^2,

and cuts at the d that minimises it: dropping a transient lowers the spread
of the rest faster than it shortens it, dropping steady points does not.
The search covers the first half of the series only (White's rule: a minimum
further on says the run is too short to tell); a cut at that limit is
reported as not settled. MSER-5 smooths raw observations into means of five;
here each observation is already a batch statistic, a time window's median
TTFT or ITL over the requests that ended in it
(``slogate.analysis.measurement.timeseries``), so the series is the run's windows.

MSER alone also cuts a steady run's noise (measured: an open loop at 2/s on
the simulated engine, its windows' TTFT p50 between 12 and 19 ms, was cut at
15 s), so a series' cut counts only when the windows it drops differ in mean
by more than MIN_SHIFT (20%) from the level of those it keeps: a transient
that matters, such as a queue filling up. For the same reason the windows
just before MSER's cut that already sit within 20% of the level after it are
given back: on a plateau MSER keeps cutting (measured: a queue settled at
1.43 s after 15 s, its windows 1,430 to 1,439 ms, was cut at 25 s, the
limit). TTFT and ITL must both have settled: the run's cut is the latest of
every scenario's two.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

METHOD = "MSER (White 1997) on each window's TTFT and ITL p50"
SERIES = ("ttft_p50_ms", "itl_p50_ms")
MIN_WINDOWS = 4  # fewer windows leave nothing to compare: no cut
# a cut counts only when the windows it drops differ by more than this share
# of the level of those it keeps (MSER alone also cuts a steady run's noise)
MIN_SHIFT = 0.2


def mser_scores(values: Sequence[float]) -> list[float]:
    """MSER(d) for d = 0 .. n // 2 (the first half only)."""
    n = len(values)
    scores = []
    for d in range(n // 2 + 1):
        rest = values[d:]
        mean = sum(rest) / len(rest)
        scores.append(sum((v - mean) ** 2 for v in rest) / len(rest) ** 2)
    return scores


def mser_cut(values: Sequence[float]) -> int:
    """How many leading values MSER drops: the first d with the least score."""
    scores = mser_scores(values)
    least = min(scores)
    return next(
        d for d, s in enumerate(scores) if math.isclose(s, least, rel_tol=1e-9, abs_tol=1e-12)
    )


@dataclass(frozen=True)
class WarmupCut:
    """Where the run settled: ``found_s`` (the start of the first window MSER
    keeps, the latest over the series), ``cut_s`` (what was left out: ``found_s``
    rounded up to the recorder's segments), each series' own cut, and whether
    every series settled inside the first half of the run."""

    found_s: float
    cut_s: float
    series: Mapping[str, float | None] = field(default_factory=dict)
    settled: bool = True
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": METHOD,
            "found_s": self.found_s,
            "cut_s": self.cut_s,
            "series": dict(self.series),
            "settled": self.settled,
            "note": self.note,
        }


def series_cut(
    rows: Iterable[Mapping[str, Any]], scenario: str, key: str
) -> tuple[float, bool] | None:
    """(the start of the first window kept, whether it is inside the first half)
    for one scenario's series; None with fewer than MIN_WINDOWS values."""
    points = [
        (r["t_s"], float(r[key]))
        for r in rows
        if r["scenario"] == scenario and r.get(key) is not None
    ]
    if len(points) < MIN_WINDOWS:
        return None
    values = [v for _, v in points]
    d = settled_from(values, mser_cut(values))
    if d and not shifted(values[:d], values[d:]):
        d = 0
    return points[d][0], d < len(values) // 2 or d == 0


def settled_from(values: Sequence[float], d: int) -> int:
    """MSER's cut ``d``, with the windows just before it that already sit within
    MIN_SHIFT of the level after it given back: on a plateau whose windows
    differ by a few tenths of a percent MSER keeps cutting, as every window
    dropped still lowers the rest's spread."""
    if d == 0:
        return 0
    level = sum(values[d:]) / (len(values) - d)
    while d > 0 and abs(values[d - 1] - level) <= MIN_SHIFT * abs(level):
        d -= 1
    return d


def shifted(dropped: Sequence[float], kept: Sequence[float]) -> bool:
    """Whether the dropped windows' mean is off the kept ones' by more than MIN_SHIFT."""
    level = sum(kept) / len(kept)
    return abs(sum(dropped) / len(dropped) - level) > MIN_SHIFT * abs(level)


def find_cut(
    rows: Sequence[Mapping[str, Any]], scenarios: Sequence[str], segment_s: float, until_s: float
) -> WarmupCut:
    """The run's cut over every scenario's TTFT and ITL series, rounded up to a
    whole ``segment_s`` (the recorder keeps the first half of the run in
    segments of that length: the cut can only fall between two). Only the
    windows that end by ``until_s`` (the run's planned end) count: those after
    it hold the few requests that finished while the run wound down."""
    rows = [r for r in rows if r["t_s"] + r["window_s"] <= until_s + 1e-9]
    found: dict[str, float | None] = {}
    settled = True
    for scenario in scenarios:
        for key in SERIES:
            cut = series_cut(rows, scenario, key)
            found[f"{scenario}:{key}"] = None if cut is None else cut[0]
            settled = settled and (cut is None or cut[1])
    known = [v for v in found.values() if v is not None]
    if not known:
        return WarmupCut(0.0, 0.0, found, True, f"fewer than {MIN_WINDOWS} windows: nothing cut")
    latest = max(known)
    cut_s = math.ceil(latest / segment_s - 1e-9) * segment_s if segment_s > 0 else latest
    note = "" if settled else "a series was still moving at half the run: a longer run would tell"
    return WarmupCut(latest, cut_s, found, settled, note)
