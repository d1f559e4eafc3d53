"""The run's load shape as a pure function of elapsed time.

Every process of a run (local, master, each worker) builds the same timeline
from the scenario and the command-line overrides, so all of them agree on which
stage a request belongs to and whether it fell in the warm-up, without
exchanging messages. No locust import: it is unit-tested as plain arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from slogate.scenarios.model import LoadSpec, RateSpec, Stage

# Dispatchers start at once: their schedule runs from the run's origin.
DISPATCHER_SPAWN_RATE = 1000.0
# ``--warmup auto``: the first half of the run is kept in this many segments, one
# bucket each, so that the cut found after the run (between two) can be applied
HEAD_SEGMENTS = 12


@dataclass(frozen=True, slots=True)
class Phase:
    """A stage placed on the timeline: [start_s, end_s)."""

    name: str
    start_s: float
    end_s: float
    users: int
    spawn_rate: float
    rate: RateSpec | None


@dataclass(frozen=True, slots=True)
class Timeline:
    """``head_s`` and ``segment_s``: with ``--warmup auto``, the first half of the
    run, whose requests are kept by segment until the cut is known (0: none)."""

    phases: tuple[Phase, ...]
    warmup_s: float
    head_s: float = 0.0
    segment_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.phases[-1].end_s if self.phases else 0.0

    @property
    def measured_s(self) -> float:
        return max(self.total_s - self.warmup_s, 0.0)

    def phase_at(self, elapsed_s: float) -> Phase | None:
        """The phase running at ``elapsed_s``; None once the run is over."""
        for phase in self.phases:
            if phase.start_s <= elapsed_s < phase.end_s:
                return phase
        return None

    def in_warmup(self, elapsed_s: float) -> bool:
        return elapsed_s < self.warmup_s

    def head_segment(self, elapsed_s: float) -> int | None:
        """``--warmup auto``: the segment of the run's first half a request ending
        at ``elapsed_s`` is kept in until the cut is known; None after it."""
        if not self.head_s or elapsed_s >= self.head_s:
            return None
        return max(int(elapsed_s // self.segment_s), 0)

    def stage_name(self, elapsed_s: float) -> str | None:
        """The stage a request ending at ``elapsed_s`` is counted in; the
        last stage keeps requests that finish while the run winds down."""
        phase = self.phase_at(elapsed_s)
        if phase is None:
            return self.phases[-1].name if self.phases and elapsed_s >= self.total_s else None
        return phase.name

    def max_users(self) -> int:
        return max((p.users for p in self.phases), default=0)


def build_timeline(load: LoadSpec, shards: int = 1) -> Timeline:
    """Lay out the scenario's stages, or one stage of ``duration`` when it has none.

    Closed loop: users per stage as declared. Open loop: ``shards`` dispatcher
    users run throughout; the stages' rates are in the arrival schedule.
    """
    stages = load.stages or (
        Stage(
            name="main",
            duration_s=load.duration_s,
            users=load.users,
            spawn_rate=load.spawn_rate,
            rate=load.rate,
        ),
    )
    phases = []
    start = 0.0
    previous_users = load.users or 1
    for stage in stages:
        rate = stage.rate or (load.rate if load.open_loop else None)
        if rate is not None:
            users, spawn_rate = shards, DISPATCHER_SPAWN_RATE
        else:
            users = stage.users if stage.users is not None else previous_users
            spawn_rate = stage.spawn_rate or load.spawn_rate or float(max(users, 1))
        phases.append(Phase(stage.name, start, start + stage.duration_s, users, spawn_rate, rate))
        start += stage.duration_s
        previous_users = users
    head_s = start / 2 if load.warmup_auto else 0.0
    return Timeline(
        phases=tuple(phases),
        warmup_s=min(load.warmup_s, start),
        head_s=head_s,
        segment_s=head_s / HEAD_SEGMENTS,
    )
