"""tests/conftest.py measures a slow test again, once, when it failed while the
hypervisor took more than its share of the machine: played here in a pytest
of its own, with the threshold below any share (every failure qualifies)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parents[1]

CASES = """
import pathlib
import time
import pytest

def tries(name):
    time.sleep(0.05)  # a few of the kernel's 10 ms ticks: a share to read
    marker = pathlib.Path(name)
    count = int(marker.read_text()) + 1 if marker.exists() else 1
    marker.write_text(str(count))
    return count

@pytest.mark.slow
def test_fails_once():
    assert tries("once") > 1, "the first try fails"

@pytest.mark.slow
def test_fails_always():
    tries("always")
    assert False, "every try fails"

def test_fast_fails_once():
    assert tries("fast") > 1, "a fast test is not measured again"
"""


@pytest.fixture
def outcome(tmp_path: Path) -> tuple[str, Path]:
    conftest = (HERE / "conftest.py").read_text()
    assert "STEAL_RERUN = 0.05\n" in conftest
    (tmp_path / "conftest.py").write_text(
        conftest.replace("STEAL_RERUN = 0.05", "STEAL_RERUN = -1")
    )
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:locust",
         "test_cases.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.stdout + done.stderr, tmp_path


def test_a_slow_test_that_failed_under_steal_is_measured_again_once(outcome):
    out, folder = outcome
    assert "PASSED test_cases.py::test_fails_once" in out, out
    assert (folder / "once").read_text() == "2"
    assert "failed while the hypervisor took" in out and "the first try fails" in out
    assert "FAILED test_cases.py::test_fails_always" in out
    assert (folder / "always").read_text() == "2"  # twice, no more
    assert "FAILED test_cases.py::test_fast_fails_once" in out
    assert (folder / "fast").read_text() == "1"  # not a slow test: not again
