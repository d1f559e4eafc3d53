"""Open-loop arrival times: Poisson, gamma (any burstiness), constant, or a
trace's own recorded times, laid out stage by stage.

Workers share one arrival process instead of each running a thinner copy:
every worker generates the same global sequence (its random numbers come from
the seed alone) and keeps the events whose uniform tag falls in its window
``[stream * rate_scale, (stream + 1) * rate_scale)``. Workers ``0..N-1`` with
``rate_scale = 1/N`` therefore partition the global process exactly, so its
burstiness (gamma CV, trace bursts) survives being split across processes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slogate.scenarios.model import LoadSpec, RateSpec
from slogate.scenarios.traces import Trace

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

BATCH = 1024


@dataclass(frozen=True, slots=True)
class Segment:
    """A stretch of the run with one arrival rate (``None``: closed loop)."""

    start_s: float
    end_s: float
    rate: RateSpec | None


def segments(load: LoadSpec) -> list[Segment]:
    """The load's stages back to back from 0; an unstaged load is one endless segment."""
    if not load.stages:
        return [Segment(0.0, math.inf, load.rate)]
    out, start = [], 0.0
    for stage in load.stages:
        out.append(Segment(start, start + stage.duration_s, stage.rate))
        start += stage.duration_s
    return out


def has_arrivals(load: LoadSpec) -> bool:
    return any(segment.rate is not None for segment in segments(load))


def arrival_events(
    load: LoadSpec,
    trace: Trace | None,
    rng: np.random.Generator,
    stream: int = 0,
    rate_scale: float = 1.0,
) -> Iterator[tuple[float, int]]:
    """``(arrival_s, event)`` of this stream's share, in time order. ``event``
    counts arrivals of the global process (for a trace: which row, modulo its
    length). Endless for an unstaged load; ends with the last stage otherwise."""
    import numpy as np

    if not 0 < rate_scale <= 1:
        raise ValueError(f"rate_scale must be in (0, 1], got {rate_scale}")
    low = (stream * rate_scale) % 1.0
    event = 0
    for segment in segments(load):
        if segment.rate is None:
            continue
        t, first = segment.start_s, True
        while True:
            gaps = _gaps(segment.rate, rng, trace, event, first)
            times = t + np.cumsum(gaps)
            tags = rng.random(BATCH)
            past = int(np.searchsorted(times, segment.end_s, side="left"))
            keep = ((tags[:past] - low) % 1.0) < rate_scale
            for i in np.flatnonzero(keep):
                yield float(times[i]), event + int(i)
            event += past
            if past < BATCH:
                break
            t, first = float(times[-1]), False


def _gaps(
    rate: RateSpec, rng: np.random.Generator, trace: Trace | None, event: int, first: bool
) -> np.ndarray:
    """The next ``BATCH`` inter-arrival gaps; a trace segment starts at its start."""
    import numpy as np

    if rate.arrival == "poisson":
        return rng.exponential(1.0 / rate.rps, BATCH)
    if rate.arrival == "gamma":
        shape = 1.0 / rate.cv**2
        return rng.gamma(shape, 1.0 / (rate.rps * shape), BATCH)
    if rate.arrival == "constant":
        return np.full(BATCH, 1.0 / rate.rps)
    if trace is None or trace.times_s is None:
        raise ValueError("arrival: trace needs a trace workload with times")
    rows = np.arange(event, event + BATCH) % trace.rows
    times = trace.times_s
    gaps = np.where(rows == 0, trace.mean_gap_s, times[rows] - times[rows - 1])
    if first:
        gaps[0] = 0.0
    return gaps * (trace.rate_rps / rate.rps)
