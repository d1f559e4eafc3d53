"""The generator's capacity: how many output events per second one load process
holds on this machine within the error bound, and so how many workers a load needs.

Selftests (the real client against the exact-schedule server, compared with the
server's truth) run at doubling numbers of streams; the held rate is the step
of the most events per second whose TTFT and ITL p50/p99 all stay within the
bound, and the first step past the bound ends the search. A run that plans E
output events per second needs ceil(E / held) worker processes (docs/load.md,
"Sizing"). The selftest is a callable the caller passes in, so this module
starts no process and imports no Locust.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_BOUND_MS = 1.0


@dataclass(frozen=True, slots=True)
class Step:
    """One selftest: its streams, the output events per second it delivered, the
    largest error of a compared percentile against the truth, and the client's cores."""

    streams: int
    events_per_s: float
    max_abs_error_ms: float
    client_cores: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "streams": self.streams,
            "events_per_s": round(self.events_per_s, 1),
            "max_abs_error_ms": round(self.max_abs_error_ms, 4),
            "client_cores": round(self.client_cores, 3),
        }


Selftest = Callable[[int], Step]


def within(step: Step, bound_ms: float) -> bool:
    """A step counts when every compared percentile is within the bound (NaN: none measured)."""
    return step.max_abs_error_ms <= bound_ms


def search(start: int, most: int, bound_ms: float, selftest: Selftest) -> list[Step]:
    """Selftests at ``start``, twice that, ... up to ``most`` streams, until one
    exceeds the bound (that one included, to show where it broke)."""
    steps: list[Step] = []
    streams = start
    while streams <= most:
        step = selftest(streams)
        steps.append(step)
        if not within(step, bound_ms):
            break
        streams *= 2
    return steps


def held(steps: list[Step], bound_ms: float) -> Step | None:
    """The step of the most events per second within the bound."""
    good = [s for s in steps if within(s, bound_ms)]
    return max(good, key=lambda s: s.events_per_s) if good else None


def workers_needed(planned_events_per_s: float, held_events_per_s: float) -> int:
    return max(1, math.ceil(planned_events_per_s / held_events_per_s))


@dataclass(frozen=True)
class Sizing:
    """What a scenario's planned load needs of this machine's load processes."""

    scenario: str
    planned_events_per_s: float
    workers: int


@dataclass(frozen=True)
class CapacityResult:
    """The search's steps, the step held (None: not even the first stayed within
    the bound) and, given a scenario, the workers its load needs."""

    bound_ms: float
    steps: list[Step]
    best: Step | None
    sizing: Sizing | None = None

    @property
    def stopped_at_most(self) -> bool:
        """The search ran out of streams to try before any step broke the bound."""
        return self.best is not None and self.best is self.steps[-1]

    def to_dict(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "bound_ms": self.bound_ms,
            "steps": [s.to_dict() for s in self.steps],
            "events_per_s": None if self.best is None else round(self.best.events_per_s, 1),
        }
        if self.sizing is not None:
            result["scenario"] = {
                "planned_events_per_s": round(self.sizing.planned_events_per_s, 1),
                "workers": self.sizing.workers,
            }
        return result


def capacity_result(
    steps: list[Step], bound_ms: float, planned: tuple[str, float] | None = None
) -> CapacityResult:
    """The held step of ``steps`` and, with ``planned`` (a scenario's name and its
    planned output events per second), the workers that load needs."""
    best = held(steps, bound_ms)
    sizing = None
    if best is not None and planned is not None:
        name, events_per_s = planned
        sizing = Sizing(name, events_per_s, workers_needed(events_per_s, best.events_per_s))
    return CapacityResult(bound_ms, steps, best, sizing)
