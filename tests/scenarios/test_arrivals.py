"""Open-loop arrival times: stages laid back to back, each process's rate and
shape, and load processes that split one global process exactly."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from slogate.scenarios.arrivals import BATCH, Segment, arrival_events, has_arrivals, segments
from slogate.scenarios.model import LoadSpec, RateSpec, Stage


def staged(*stages: tuple[float, RateSpec | None]) -> LoadSpec:
    return LoadSpec(
        stages=tuple(
            Stage(f"s{i}", duration, users=None if rate else 2, rate=rate)
            for i, (duration, rate) in enumerate(stages)
        )
    )


def events(load: LoadSpec, seed: int = 7, **share: float) -> list[tuple[float, int]]:
    return list(arrival_events(load, None, np.random.default_rng(seed), **share))


def test_stages_follow_each_other_and_an_unstaged_load_never_ends() -> None:
    rate = RateSpec(5.0)
    load = staged((10.0, rate), (5.0, None), (20.0, rate))
    assert segments(load) == [
        Segment(0.0, 10.0, rate),
        Segment(10.0, 15.0, None),
        Segment(15.0, 35.0, rate),
    ]
    assert segments(LoadSpec(rate=rate)) == [Segment(0.0, float("inf"), rate)]
    assert has_arrivals(load) and has_arrivals(LoadSpec(rate=rate))
    assert not has_arrivals(LoadSpec(users=4)) and not has_arrivals(staged((5.0, None)))


def test_a_constant_rate_arrives_on_its_grid_and_skips_a_closed_stage() -> None:
    load = staged((2.0, RateSpec(4.0, "constant")), (3.0, None), (1.0, RateSpec(2.0, "constant")))
    times = [t for t, _ in events(load)]
    # 0.25 s apart from the start (the first gap counts too), none in the closed stage
    assert times == pytest.approx([0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 5.5])
    assert [e for _, e in events(load)] == list(range(8))  # the global count runs on


def test_poisson_and_gamma_hold_their_rate_and_burstiness() -> None:
    for arrival, cv in (("poisson", 1.0), ("gamma", 3.0), ("gamma", 0.5)):
        load = staged((2000.0, RateSpec(10.0, arrival, cv)))
        times = np.array([t for t, _ in events(load)])
        gaps = np.diff(times)
        assert len(times) == pytest.approx(20_000, rel=0.05)  # more than one batch of gaps
        assert len(times) > BATCH
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.1)
        assert np.all(gaps >= 0) and times[-1] < 2000.0


def test_load_processes_partition_the_global_process_exactly() -> None:
    """Four workers with a quarter each: together, every event of the single
    process once, at the same instants, bursts and all."""
    load = staged((300.0, RateSpec(20.0, "gamma", 4.0)))
    whole = events(load)
    shares = [events(load, stream=i, rate_scale=0.25) for i in range(4)]
    assert sorted(itertools.chain(*shares)) == whole
    assert all(len(share) == pytest.approx(len(whole) / 4, rel=0.1) for share in shares)
    assert not set(shares[0]) & set(shares[1])


def test_the_same_seed_gives_the_same_arrivals_and_a_bad_share_is_refused() -> None:
    load = staged((50.0, RateSpec(5.0)))
    assert events(load, seed=3) == events(load, seed=3) != events(load, seed=4)
    with pytest.raises(ValueError, match="rate_scale"):
        events(load, rate_scale=0.0)
    with pytest.raises(ValueError, match="rate_scale"):
        events(load, rate_scale=1.5)


def test_trace_arrivals_need_a_trace_with_times() -> None:
    with pytest.raises(ValueError, match="trace"):
        events(staged((5.0, RateSpec(1.0, "trace"))))
