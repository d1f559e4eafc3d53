"""Structured outputs in the numbers (issue 40, item 2): validity counted,
broken answers named, TTFT and TPOT apart for constrained and unconstrained
requests, the compile gap, all merged exactly across processes, and the
schema_validity SLO."""

from __future__ import annotations

import pytest

from slogate.analysis.documents.summary import structured_block
from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.verdict.slo import Verdict, evaluate
from slogate.scenarios.model import Threshold

MS = 1_000_000


def finished(ttft_ms: int, constrained: bool | None, first: bool = False, error: str | None = None):
    record = RequestRecord("so", start_ns=0, conversation=ttft_ms, turn=0)
    record.chunk_ns = [ttft_ms * MS, (ttft_ms + 10) * MS, (ttft_ms + 20) * MS]
    record.chunk_chars = [4, 4, 4]
    record.end_ns = (ttft_ms + 20) * MS
    record.output_tokens = 3
    record.constrained, record.schema_first, record.schema_error = constrained, first, error
    return record


RECORDS = [
    finished(100, True, first=True),
    finished(102, True, first=True, error="$['color']: 'blue' is not one of ['red']"),
    finished(40, True),
    finished(41, True),
    finished(42, True),
    finished(20, False),
    finished(21, False),
]


def test_the_block_splits_ttft_and_shows_the_compile_gap():
    recorder = Recorder()
    for record in RECORDS:
        recorder.record(record, wall_s=1.0)
    block = structured_block(recorder.bucket("so", "all"))
    assert block is not None
    assert (block["constrained"], block["valid"], block["invalid"]) == (5, 4, 1)
    assert block["validity"] == 0.8 and block["schema_first"] == 2
    assert block["invalid_samples"] == [
        "conversation 102 turn 0: $['color']: 'blue' is not one of ['red']"
    ]
    assert (
        block["ttft_constrained_ms"]["count"] == 5 and block["ttft_unconstrained_ms"]["count"] == 2
    )
    assert block["tpot_constrained_ms"]["count"] == 5
    assert (
        block["ttft_schema_first_ms"]["count"] == 2 and block["ttft_schema_cached_ms"]["count"] == 3
    )
    assert block["compile_gap_ms"] == pytest.approx(100 - 41, abs=0.2)


def test_a_scenario_without_structured_outputs_has_no_block():
    recorder = Recorder()
    recorder.record(finished(30, None), wall_s=1.0)
    bucket = recorder.bucket("so", "all")
    assert structured_block(bucket) is None
    assert "ttft_unconstrained" not in bucket.histograms  # nothing recorded for it


def test_counts_merge_exactly_and_the_slo_fails_below_its_minimum():
    single, master = Recorder(), Recorder()
    workers = [Recorder(), Recorder()]
    for i, record in enumerate(RECORDS):
        single.record(record, wall_s=1.0)
        workers[i % 2].record(record, wall_s=1.0)
    for worker in workers:
        master.absorb(worker.drain())
    bucket = master.bucket("so", "all")
    assert structured_block(bucket) == structured_block(single.bucket("so", "all"))
    failing = evaluate("so", Threshold("schema_validity", "fraction", 0.9, "min"), bucket, 1.0)
    assert (failing.verdict, failing.value, failing.count) == (Verdict.FAIL, 0.8, 5)
    passing = evaluate("so", Threshold("schema_validity", "fraction", 0.75, "min"), bucket, 1.0)
    assert passing.verdict == Verdict.PASS
