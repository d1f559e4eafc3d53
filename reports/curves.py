"""HDR-style percentile curves: a metric's value against the percentile on a 'nines' axis.

The x position of percentile p is ``-log10(1 - p/100)``: 90% at 1, 99% at 2,
99.9% at 3, so the tail gets as much room as the body. Values come from
:func:`slogate.analysis.measurement.histograms.recorded` (numpy, the library's own rank rule),
because a plot needs a hundred percentiles and ``hdrh``'s Python loop costs a
millisecond each.
"""

from __future__ import annotations

import math

import numpy as np
from hdrh.histogram import HdrHistogram

from slogate.analysis.measurement.histograms import recorded

NINES_LABELS = ("0", "90", "99", "99.9", "99.99", "99.999", "99.9999")
MAX_NINES = len(NINES_LABELS) - 1


def nines(percentile: float) -> float:
    """Axis position of a percentile (0 < percentile < 100)."""
    return -math.log10(1.0 - percentile / 100.0)


def nines_ticks(top: float) -> list[tuple[float, str]]:
    return [(float(i), label) for i, label in enumerate(NINES_LABELS) if i <= math.ceil(top)]


def percentile_curve(
    histogram: HdrHistogram, unit: float = 1000.0, step: float = 0.05
) -> list[tuple[float, float]]:
    """Points (nines, value / unit) every ``step`` from 0 up to the highest percentile
    the sample count resolves (at most six nines), ending at the maximum."""
    n = histogram.get_total_count()
    if n == 0:
        return []
    view = recorded(histogram)
    top = min(math.log10(n), MAX_NINES)
    positions = np.arange(0.0, top, step)
    targets = np.maximum(1, np.floor((1.0 - 10.0**-positions) * n + 0.5))
    ranks = np.searchsorted(view.cumulative, targets, side="left")
    values = view.highest[np.minimum(ranks, len(view.highest) - 1)]
    points = [(float(x), float(v) / unit) for x, v in zip(positions, values, strict=True)]
    points.append((top, histogram.get_max_value() / unit))
    return points
