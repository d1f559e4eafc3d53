"""Trace files: every time format, other column layouts, prefix blocks, replay."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from slogate import scenarios
from slogate.scenarios import traces
from slogate.scenarios.traces import TraceColumns, TraceError, load_trace

COLUMNS = TraceColumns(time="t", input_tokens="in", output_tokens="out")


def csv_trace(tmp_path: Path, times: list[str], name: str = "t.csv") -> Path:
    path = tmp_path / name
    rows = [f'"{t}",{100 + i},{10 + i}' for i, t in enumerate(times)]
    path.write_text("t,in,out\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize(
    ("times", "unit", "expected"),
    [
        (["10", "10.5", "13"], "s", [0, 0.5, 3]),
        (["10", "10.5", "13"], "auto", [0, 0.5, 3]),
        (["1000", "1500", "4000"], "ms", [0, 0.5, 3]),
        (["1000000", "1500000", "4000000"], "us", [0, 0.5, 3]),
        (
            [
                "2023-11-16 18:15:46.6805900",
                "2023-11-16 18:15:47.1805900",
                "2023-11-16 18:15:49.6805900",
            ],
            "datetime",
            [0, 0.5, 3],
        ),
        (
            ["2024-02-29T23:59:59.5Z", "2024-03-01T00:00:00Z", "2024-03-01T00:00:02.5Z"],
            "auto",
            [0, 0.5, 3],
        ),
        (
            ["2024-01-01T12:00:00+02:00", "2024-01-01T10:00:00.5Z", "2024-01-01T09:00:03-01:00"],
            "datetime",
            [0, 0.5, 3],
        ),
        (["2024-01-01 10:00", "2024-01-01 10:01", "2024-01-01 10:03"], "auto", [0, 60, 180]),
    ],
)
def test_time_formats(tmp_path, times, unit, expected):
    trace = load_trace(csv_trace(tmp_path, times), COLUMNS, unit)
    assert np.allclose(trace.times_s, expected, atol=1e-6)
    assert list(trace.input_tokens) == [100, 101, 102]


def test_rows_are_sorted_by_time(tmp_path):
    trace = load_trace(csv_trace(tmp_path, ["5", "1", "3"]), COLUMNS, "s")
    assert list(trace.times_s) == [0, 2, 4]
    assert list(trace.input_tokens) == [101, 102, 100]
    assert trace.rate_rps == pytest.approx(0.5) and trace.span_s == 4


@pytest.mark.parametrize(
    ("times", "unit", "message"),
    [
        (["1", "later"], "s", "t.csv line 3, field 't': expected a number >= 0, got 'later'"),
        (["2024-01-01 10:00", "noon"], "datetime", "t.csv line 3, field 't': expected date-time"),
        (["1", "-2"], "s", "got '-2'"),
    ],
)
def test_bad_times(tmp_path, times, unit, message):
    with pytest.raises(TraceError, match=message) as info:
        load_trace(csv_trace(tmp_path, times), COLUMNS, unit)
    assert info.value.key == "columns.time"


def test_formats_and_missing_columns(tmp_path):
    path = tmp_path / "trace.data"
    path.write_text("t,in,out\n1,2,3\n")
    with pytest.raises(TraceError, match="set format: csv or jsonl"):
        load_trace(path, COLUMNS)
    assert load_trace(path, COLUMNS, fmt="csv").rows == 1
    with pytest.raises(TraceError, match=r"column 'x' not in trace.data \(columns: t, in, out\)"):
        load_trace(path, TraceColumns(time="x", input_tokens="in", output_tokens="out"), fmt="csv")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\nnot json\n')
    with pytest.raises(TraceError, match="line 2: not JSON"):
        load_trace(bad, COLUMNS)
    with pytest.raises(TraceError, match="file not found"):
        traces.resolve("nope.csv", tmp_path)


def mooncake_like(tmp_path: Path) -> Path:
    """A JSONL trace in another layout: milliseconds, other names, block-hash lists."""
    rows = [
        {"timestamp": 0, "input_length": 1100, "output_length": 20, "hash_ids": [1, 2]},
        {"timestamp": 250, "input_length": 1300, "output_length": 30, "hash_ids": [1, 2, 3]},
        {"timestamp": 1250, "input_length": 700, "output_length": 5, "hash_ids": [1, 9]},
        {"timestamp": 1300, "input_length": 40, "output_length": 8, "hash_ids": [4]},
    ]
    path = tmp_path / "other.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def other_layout_scenario(tmp_path: Path, speed: str) -> Path:
    path = tmp_path / "replay.yaml"
    path.write_text(
        f"""
workload:
  kind: trace
  file: {mooncake_like(tmp_path).name}
  columns: {{time: timestamp, input_tokens: input_length, output_tokens: output_length,
            prefix_blocks: hash_ids}}
  time_unit: ms
  block_tokens: 512
load:
  rate: {{arrival: trace, {speed}}}
"""
    )
    return path


def test_another_layout_replays_after_naming_its_columns(tmp_path):
    [s] = scenarios.load(other_layout_scenario(tmp_path, "speedup: 1"))
    rows = list(scenarios.sample_requests([s], 8))
    arrivals = [r["arrival_s"] for r in rows[:4]]
    assert arrivals == pytest.approx([0.0, 0.25, 1.25, 1.30])
    assert [r["input_tokens"] for r in rows[:4]] == [1100, 1300, 700, 40]
    assert [r["output_tokens"] for r in rows[:4]] == [20, 30, 5, 8]
    # the trace repeats after a mean gap, keeping its shape
    assert rows[4]["arrival_s"] == pytest.approx(1.30 + 1.30 / 3)
    assert rows[5]["arrival_s"] - rows[4]["arrival_s"] == pytest.approx(0.25)
    # rows 0 and 1 share blocks 1 and 2; row 2 can only share block 1 (700 < 2 * 512);
    # row 3 is shorter than one block, so nothing of it is shared
    assert rows[0]["prefix_id"].startswith("blocks:2:")
    assert (
        rows[1]["prefix_id"].startswith("blocks:2:")
        and rows[1]["prefix_id"] == rows[0]["prefix_id"]
    )
    assert rows[2]["prefix_id"].startswith("blocks:1:") and rows[3]["prefix_id"] is None


def test_rate_scaling_and_speedup(tmp_path):
    [fast] = scenarios.load(other_layout_scenario(tmp_path, "speedup: 2"))
    rows = list(scenarios.sample_requests([fast], 4))
    assert [r["arrival_s"] for r in rows] == pytest.approx([0.0, 0.125, 0.625, 0.65])
    [paced] = scenarios.load(other_layout_scenario(tmp_path, "rps: 6"))
    assert paced.workload.trace.rate_rps == pytest.approx(3 / 1.3)
    rows = list(scenarios.sample_requests([paced], 400))
    gaps = np.diff([r["arrival_s"] for r in rows])
    assert 1 / gaps.mean() == pytest.approx(6, rel=0.01)


def test_azure_trace_keeps_its_burstiness():
    [s] = scenarios.load("azure-code")
    rows = list(scenarios.sample_requests([s], 3000))
    gaps = np.diff([r["arrival_s"] for r in rows])
    trace_gaps = np.diff(s.workload.trace.times_s[:3000])
    assert np.allclose(gaps, trace_gaps, rtol=0, atol=1e-6)  # the sample rounds to 1 us
    [conv] = scenarios.load("azure-conv")
    conv_gaps = np.diff(conv.workload.trace.times_s)
    assert conv_gaps.std() / conv_gaps.mean() == pytest.approx(1.1, abs=0.05)
    all_gaps = np.diff(s.workload.trace.times_s)
    assert all_gaps.std() / all_gaps.mean() == pytest.approx(13, abs=0.5)
