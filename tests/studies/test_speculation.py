"""The speculative experiment's arithmetic: each load's TPOT speedup and the
load where it falls through 1."""

from __future__ import annotations

import pytest

from slogate.studies.speculation import crossover, speedups


def test_crossover_is_where_the_speedup_falls_through_one() -> None:
    points = [
        {"label": f"{arm}-{x}", "x": x, "metrics": {"tpot_ms": {"mean": tpot}}}
        for arm, x, tpot in (
            ("off", 1, 8.0),
            ("on", 1, 4.0),
            ("off", 4, 8.0),
            ("on", 4, 6.4),
            ("off", 16, 9.0),
            ("on", 16, 12.0),
            ("on", 64, 30.0),  # no pair: left out
        )
    ]
    pairs = speedups(points)
    assert pairs == [(1.0, 2.0), (4.0, 1.25), (16.0, 0.75)]
    found = crossover(pairs)
    assert found["between"] == [4.0, 16.0]
    assert found["users"] == pytest.approx(8.0)  # halfway from 1.25 to 0.75, on log users
    assert crossover([(1.0, 2.0), (4.0, 1.5)])["users"] is None
    assert crossover([(1.0, 0.9), (4.0, 0.5)]) == {"users": None, "between": None, "below": True}
