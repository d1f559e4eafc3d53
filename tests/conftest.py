"""Parallel runs (pytest-xdist, ``--dist loadgroup``): a module's tests share a
worker, so a module-scoped server starts once, not once per worker. Tests that
name an ``xdist_group`` themselves (the llama.cpp modules, which share one)
keep it.

xdist reads the groups from the node ids, where its own hook appends them on
each worker; this hook runs first, so the groups it adds are there to read
(without ``tryfirst`` xdist's hook, registered later, ran first and a module's
tests were spread over both workers, each starting the module's servers).
tests/project/test_parallel_groups.py fails when the groups do not take.

A slow test (real loads, real timing) that fails while the machine's
hypervisor took more than ``STEAL_RERUN`` of its CPU time is measured again,
once: clean-clone CI runs here had it take 13 to 19%, the load generator
rightly judged its own runs unfit, and tests of timing claims failed on what
the machine did. The first try stays in the record (a warning names the
steal and the failure); a test that fails again fails."""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol

from slogate.locustfiles.loopwatch import machine_ticks, steal_share

STEAL_RERUN = 0.05


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if item.get_closest_marker("slow") is None:
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    before = machine_ticks()
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    share = steal_share(before, machine_ticks())
    if share is not None and share > STEAL_RERUN and only_the_call_failed(reports):
        item.warn(
            pytest.PytestWarning(
                f"failed while the hypervisor took {share:.1%} of the machine's CPU time "
                f"({first_line(reports)}); measured again"
            )
        )
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def only_the_call_failed(reports: list[pytest.TestReport]) -> bool:
    """The test itself failed, its set-up and tear-down did not (a failed set-up
    leaves state a second try would trip over)."""
    return [r.when for r in reports if r.failed] == ["call"] and len(reports) == 3


def first_line(reports: list[pytest.TestReport]) -> str:
    """The failure's message, its first line."""
    failed = next(r for r in reports if r.failed)
    crash = getattr(failed.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else failed.longreprtext
    return text.strip().splitlines()[0][:300]
