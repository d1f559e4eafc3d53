"""How bursty a trace's arrivals are at a given speed-up: the most arrivals
within any millisecond and any 10 ms, and the prompt tokens per second the
load generator must build (on average and in its busiest second).

A speed-up divides every gap by the same factor, so arrivals recorded in the
same instant stay in the same instant (a burst stays a burst) while the
quiet between bursts shrinks: the largest burst per millisecond can only
grow with the speed, and the prompt tokens per second grow in proportion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from slogate.scenarios.arrivals import segments
from slogate.scenarios.model import Scenario
from slogate.scenarios.workloads import TraceWorkload

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

SPEEDS = (1.0, 2.0, 5.0)  # reported beside the scenario's own


@dataclass(frozen=True, slots=True)
class Burstiness:
    """A trace's arrivals at one speed-up. ``per_ms`` and ``per_10ms``: the most
    arrivals within any window of that length; ``arrivals_per_s`` the mean;
    ``prompt_tokens_per_s`` the mean and ``peak_prompt_tokens_per_s`` those of
    the busiest one-second window; ``peak_arrivals_per_s`` that window's count."""

    speed: float
    per_ms: int
    per_10ms: int
    arrivals_per_s: float
    peak_arrivals_per_s: int
    prompt_tokens_per_s: float
    peak_prompt_tokens_per_s: float

    def line(self) -> str:
        return (
            f"speed {self.speed:g}: {self.arrivals_per_s:.2f} arrivals/s "
            f"(busiest second {self.peak_arrivals_per_s}), at most {self.per_ms} within 1 ms "
            f"and {self.per_10ms} within 10 ms; prompt tokens "
            f"{self.prompt_tokens_per_s:,.0f}/s "
            f"(busiest second {self.peak_prompt_tokens_per_s:,.0f})"
        )


def most_within(times_s: np.ndarray, window_s: float) -> int:
    """The most arrivals (sorted ``times_s``) in any window ``[t, t + window_s)``."""
    import numpy as np

    if not len(times_s):
        return 0
    ends = np.searchsorted(times_s, times_s + window_s, side="left")
    return int((ends - np.arange(len(times_s))).max())


def busiest_second(times_s: np.ndarray, tokens: np.ndarray) -> tuple[int, float]:
    """The arrivals and prompt tokens of the busiest one-second window that
    starts at an arrival."""
    import numpy as np

    if not len(times_s):
        return 0, 0.0
    starts = np.arange(len(times_s))
    ends = np.searchsorted(times_s, times_s + 1.0, side="left")
    cumulative = np.concatenate(([0], np.cumsum(tokens, dtype=np.float64)))
    sums = cumulative[ends] - cumulative[starts]
    return int((ends - starts).max()), float(sums.max())


def burstiness(times_s: np.ndarray, input_tokens: np.ndarray, speed: float) -> Burstiness:
    """The arrivals of a trace (times from its first request, sorted) replayed at
    ``speed``. A trace of one instant counts as spanning one second."""
    import numpy as np

    if speed <= 0:
        raise ValueError(f"speed must be positive, got {speed}")
    times = np.asarray(times_s, dtype=np.float64) / speed
    tokens = np.asarray(input_tokens, dtype=np.float64)
    span = float(times[-1]) if len(times) > 1 and times[-1] > 0 else 1.0
    peak_arrivals, peak_tokens = busiest_second(times, tokens)
    return Burstiness(
        speed=speed,
        per_ms=most_within(times, 0.001),
        per_10ms=most_within(times, 0.010),
        arrivals_per_s=len(times) / span,
        peak_arrivals_per_s=peak_arrivals,
        prompt_tokens_per_s=float(tokens.sum()) / span,
        peak_prompt_tokens_per_s=peak_tokens,
    )


@dataclass(frozen=True, slots=True)
class Replayed:
    """What a scenario replays at its recorded times: the arrivals (seconds
    from the trace's first request), their prompt tokens, and the speed-up."""

    times_s: np.ndarray
    input_tokens: np.ndarray
    speed: float


def replayed_trace(scenario: Scenario) -> Replayed | None:
    """The trace a scenario replays at its recorded times (``arrival: trace``)
    at the speed-up of its first such stage; None when it replays none."""
    workload = scenario.workload
    if not isinstance(workload, TraceWorkload):
        return None
    trace = workload.trace
    times = trace.times_s
    if times is None:
        return None
    for segment in segments(scenario.load):
        if segment.rate is not None and segment.rate.arrival == "trace":
            return Replayed(times, trace.input_tokens, segment.rate.rps / trace.rate_rps)
    return None


def trace_burstiness(replayed: Replayed) -> list[Burstiness]:
    """The trace at each of ``SPEEDS`` and at its own speed, slowest first."""
    speeds = sorted({*SPEEDS, replayed.speed})
    return [burstiness(replayed.times_s, replayed.input_tokens, s) for s in speeds]
