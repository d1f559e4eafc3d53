"""`slogate capacity`: the events per second one load process holds within the
bound, measured by selftests at doubling streams, and the workers a load needs."""

from __future__ import annotations

import json
import math

import pytest
from loadruns import slogate

from slogate import scenarios
from slogate.capacity import Step, held, workers_needed
from slogate.locustfiles.processes import planned_event_rate


def test_the_held_rate_is_the_busiest_step_within_the_bound():
    steps = [Step(32, 1600, 0.2, 0.1), Step(64, 3200, 0.7, 0.2), Step(128, 6100, 3.5, 0.5)]
    assert held(steps, 1.0) == steps[1]
    assert held(steps, 5.0) == steps[2]
    assert held(steps, 0.1) is None
    assert held([Step(32, 1600, float("nan"), 0.1)], 1.0) is None  # nothing compared


def test_workers_needed_rounds_up_and_is_at_least_one():
    assert workers_needed(10_000, 4_000) == 3
    assert workers_needed(8_000, 4_000) == 2
    assert workers_needed(0, 4_000) == 1


@pytest.mark.slow
def test_capacity_measures_steps_and_sizes_a_scenario():
    done = slogate("capacity", "--start", "4", "--max-streams", "8", "--step-duration", "1",
                   "--scenario", "tests/data/exact-chat.yaml", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    streams = [s["streams"] for s in result["steps"]]
    assert streams[0] == 4 and streams[1:] in ([], [8])
    good = [s for s in result["steps"] if s["max_abs_error_ms"] <= 1.0]
    assert result["events_per_s"] == max(s["events_per_s"] for s in good)
    planned = planned_event_rate(scenarios.load("tests/data/exact-chat.yaml"))
    assert result["scenario"]["workers"] == math.ceil(planned / result["events_per_s"])
