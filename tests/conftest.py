"""Parallel runs (pytest-xdist, ``--dist loadgroup``): a module's tests share a
worker, so a module-scoped server starts once, not once per worker. Tests that
name an ``xdist_group`` themselves (the llama.cpp modules, which share one)
keep it.

xdist reads the groups from the node ids, where its own hook appends them on
each worker; this hook runs first, so the groups it adds are there to read
(without ``tryfirst`` xdist's hook, registered later, ran first and a module's
tests were spread over both workers, each starting the module's servers).
tests/test_parallel_groups.py fails when the groups do not take."""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
