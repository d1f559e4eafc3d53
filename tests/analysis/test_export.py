"""``--save-requests`` lines: a request's observations and the latencies derived
from them, from recorded timestamps with known answers."""

from __future__ import annotations

import json

import pytest
from reportdata import MS, request

from slogate.analysis.documents.export import request_line
from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.analysis.measurement.request_metrics import request_metrics


def line_of(record: RequestRecord, end_wall_s: float = 1000.0, **kw: object) -> dict:
    args = {"stage": "main", "warmup": False, **kw}
    return request_line(record, request_metrics(record), end_wall_s, **args)


def test_a_successful_request_has_its_timings_in_ms_and_offsets_from_its_start() -> None:
    record = request(ttft_ms=50.0, itl_ms=20.0, tokens=5)
    record.turn, record.conversation = 2, 7
    line = line_of(record, end_wall_s=1000.0, stage="ramp")
    assert line["ttft_ms"] == 50.0
    assert line["chunk_ms"] == [50.0, 70.0, 90.0, 110.0, 130.0]
    assert line["tpot_ms"] == 20.0
    assert line["e2e_ms"] == 131.0
    assert line["max_stall_ms"] == 20.0
    assert line["start_s"] == pytest.approx(1000.0 - 0.131)
    assert (line["turn"], line["conversation"], line["stage"]) == (2, 7, "ramp")
    assert (line["ok"], line["error"], line["output_tokens"]) == (True, None, 5)
    assert line["count_method"] == "usage"
    json.dumps(line, allow_nan=False)


def test_a_failed_request_keeps_its_error_and_the_chunks_that_came() -> None:
    record = request(ttft_ms=30.0, itl_ms=10.0, tokens=3)
    record.output_tokens = None
    record.fail(ErrorKind.TIMEOUT_STALL, "no chunk for 30 s", end_ns=record.start_ns + 40 * MS)
    line = line_of(record)
    assert (line["ok"], line["error"], line["error_message"]) == (
        False,
        "timeout_stall",
        "no chunk for 30 s",
    )
    assert line["chunk_ms"] == [30.0, 40.0, 50.0]
    assert line["e2e_ms"] == 40.0


def test_open_loop_lines_carry_the_scheduled_latencies_and_lag() -> None:
    record = request(ttft_ms=50.0, tokens=2)
    record.scheduled_ns = record.start_ns - 5 * MS
    line = line_of(record, warmup=True)
    assert (line["lag_ms"], line["ttft_sched_ms"]) == (5.0, 55.0)
    assert line["warmup"] is True
