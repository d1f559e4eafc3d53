"""The calibration table: the simulator within 20% of every published point, and
the table in docs/simengine.md is exactly what the simulator computes today."""

from __future__ import annotations

from pathlib import Path

import pytest

from slogate.simengine.calibration import REFERENCES, calibrate, markdown

pytestmark = pytest.mark.slow  # calibrate() simulates nine published benchmarks

DOC = Path(__file__).resolve().parents[1] / "docs" / "simengine.md"


@pytest.fixture(scope="module")
def rows() -> list:
    return calibrate()


def test_every_published_point_is_within_tolerance(rows: list) -> None:
    assert len(rows) == len(REFERENCES) == 9
    for row in rows:
        assert row.ok, f"{row.reference.label} {row.reference.metric}: {row.error:+.1%}"


def test_the_documented_table_is_reproduced(rows: list) -> None:
    assert markdown(rows) in DOC.read_text("utf-8")


def test_the_shape_of_the_published_curves(rows: list) -> None:
    by_key = {
        (r.reference.concurrency, r.reference.input_tokens, r.reference.metric): r.simulated
        for r in rows
    }
    # NIM 70B at 5000/500: queueing raises TTFT and ITL with concurrency, throughput saturates
    assert by_key[(50, 5000, "ttft_ms")] > by_key[(1, 5000, "ttft_ms")]
    assert by_key[(50, 5000, "itl_ms")] > 2 * by_key[(1, 5000, "itl_ms")]
    assert (
        by_key[(200, 5000, "output_tokens_per_s")] < 1.3 * by_key[(50, 5000, "output_tokens_per_s")]
    )
