"""The load shape Locust follows: the scenario's timeline, stage by stage."""

from __future__ import annotations

from locust import LoadTestShape
from locust.runners import MasterRunner

from slogate.locustfiles.state import current_context
from slogate.locustfiles.users import OpenLoopUser, SlogateUser


class SlogateShape(LoadTestShape):
    """Users (closed loop) or dispatcher shards (open loop) per stage, until
    the timeline ends, or until the run is told to stop early (``--abort-on-fail``:
    its answer is known). ``-u``/``-r``/``-t`` reach it through the scenario's
    overrides, hence ``use_common_options``. On a master the shape stops the
    workers itself before the run ends: Locust's quit alone would give their
    final reports half a second (docs/design.md)."""

    use_common_options = True

    def tick(self) -> tuple[int, float, list] | None:
        ctx = current_context()
        phase = None if ctx.stop_early else ctx.timeline.phase_at(ctx.elapsed_s())
        if phase is None:
            ctx.timeline_done = True
            if isinstance(self.runner, MasterRunner):
                self.runner.stop()  # workers stop and send their final data first
            return None
        user_class = OpenLoopUser if phase.rate is not None else SlogateUser
        return phase.users, phase.spawn_rate, [user_class]
