"""Parallel runs (pytest-xdist, ``--dist loadgroup``): a module's tests share a
worker, so a module-scoped server starts once, not once per worker. Tests that
name an ``xdist_group`` themselves (the llama.cpp modules, which share one)
keep it."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
