"""The parallel run's grouping takes effect: under ``--dist loadgroup`` each
test's node id carries its module's group (xdist schedules by that suffix).
pytest 9.2 gave node ids a structure that xdist 3.8's suffix no longer
changes (pytest-xdist issue 1386): tests then spread silently over the
workers, so this fails instead."""

from __future__ import annotations

import pytest


def test_this_module_s_tests_are_scheduled_as_one_group(request: pytest.FixtureRequest) -> None:
    if not request.config.getoption("loadgroup", False):  # set on xdist's workers
        pytest.skip("not a worker of a parallel run with --dist loadgroup")
    assert request.node.nodeid.endswith("@test_parallel_groups"), request.node.nodeid
