"""`slogate capacity`: the events per second one load process holds within the
bound, measured by selftests at doubling streams, and the workers a load needs."""

from __future__ import annotations

import json
import math

import pytest
from loadruns import slogate

from slogate import scenarios
from slogate.locustfiles.processes import planned_event_rate
from slogate.reports.study_lines import capacity_text
from slogate.studies.generator_capacity import (
    Step,
    capacity_result,
    held,
    search,
    workers_needed,
)


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


def errors_growing_with_streams(tried: list[int]):
    """A machine whose error is 0.01 ms per stream and that delivers 50 events/s per
    stream: 64 streams are within 1 ms (0.64), 128 are not (1.28)."""

    def selftest(streams: int) -> Step:
        tried.append(streams)
        return Step(streams, 50.0 * streams, 0.01 * streams, streams / 100)

    return selftest


def test_the_search_doubles_until_a_step_breaks_the_bound():
    tried: list[int] = []
    steps = search(8, 1024, 1.0, errors_growing_with_streams(tried))
    assert tried == [8, 16, 32, 64, 128]  # 128 broke the bound and ended it
    result = capacity_result(steps, 1.0, ("chat", 10_000.0))
    assert result.best == steps[3] and not result.stopped_at_most
    assert result.to_dict()["events_per_s"] == 3200.0
    assert result.to_dict()["scenario"] == {"planned_events_per_s": 10_000.0, "workers": 4}
    assert capacity_text(result, 8, 1024) == (
        "one worker process holds 3,200 output events/s within 1 ms here "
        "(64 streams, 0.64 cores)\nchat: up to 10,000 output events/s planned -> 4 worker(s)"
    )


def test_a_search_that_never_broke_the_bound_says_where_it_stopped():
    tried: list[int] = []
    result = capacity_result(search(8, 32, 1.0, errors_growing_with_streams(tried)), 1.0)
    assert tried == [8, 16, 32] and result.stopped_at_most and result.sizing is None
    assert capacity_text(result, 8, 32).endswith(
        "; the search stopped at --max-streams 32, not at the bound"
    )
    nothing = capacity_result(search(8, 32, 0.01, errors_growing_with_streams([])), 0.01)
    assert nothing.best is None and nothing.to_dict()["events_per_s"] is None
    assert capacity_text(nothing, 8, 32) == "not even 8 streams stay within 0.01 ms here"


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
