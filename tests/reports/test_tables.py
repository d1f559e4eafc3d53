"""The CSV files: every percentile the summary holds, one row per metric and
span with its interval, and the time series with endpoints and replicas apart,
every text cell safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io

from reportdata import realistic_run

from slogate.analysis.documents.contracts import Summary, parse
from slogate.analysis.documents.summary import build_summary
from slogate.reports.tables import PERCENTILE_COLUMNS, percentiles_csv, timeseries_csv, to_csv


def rows_of(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_each_percentile_row_is_the_summarys_number_with_its_interval() -> None:
    data = build_summary(realistic_run(n=2000))
    summary = parse(Summary, data, "summary.json")
    rows = rows_of(percentiles_csv(summary))
    assert list(rows[0]) == PERCENTILE_COLUMNS
    ttft = next(r for r in rows if (r["span"], r["metric"]) == ("all", "ttft_ms"))
    expected = data["scenarios"]["chat"]["metrics"]["ttft_ms"]
    assert int(ttft["count"]) == expected["count"] == 2000
    assert float(ttft["p99"]) == expected["p99"]
    assert ttft["unit"] == "ms"
    assert float(ttft["p99_lower"]) <= float(ttft["p99"]) <= float(ttft["p99_upper"])
    spans = {r["span"] for r in rows}
    assert {"all", "turn:1", "turn:2"} <= spans
    assert any(span.startswith("stage:") for span in spans)
    per_metric = {(r["span"], r["metric"]) for r in rows}
    assert len(per_metric) == len(rows)  # one row per metric and span


def test_the_time_series_puts_each_endpoint_and_replica_after_the_scenarios_rows() -> None:
    scenario_rows = [
        {"scenario": "chat", "t_s": 5.0, "requests": 10, "errors": {"http_5xx": 1}},
        {"scenario": "chat", "t_s": 0.0, "requests": 8, "errors": {}},
    ]
    apart = [
        {"scenario": "chat", "replica": "pod-b", "t_s": 0.0, "requests": 4},
        {"scenario": "chat", "endpoint": "east", "t_s": 5.0, "requests": 6},
        {"scenario": "chat", "replica": "pod-a", "t_s": 5.0, "requests": 5},
        {"scenario": "chat", "endpoint": "east", "t_s": 0.0, "requests": 3},
    ]
    rows = rows_of(timeseries_csv(scenario_rows, apart))
    assert list(rows[0])[:3] == ["scenario", "endpoint", "replica"]
    assert "errors_http_5xx" in rows[0]  # nested counts flattened into columns
    keys = [(r["endpoint"], r["replica"], r["t_s"]) for r in rows]
    assert keys == [
        ("", "", "5.0"),
        ("", "", "0.0"),  # the scenario's own rows as given
        ("east", "", "0.0"),
        ("east", "", "5.0"),  # endpoints before replicas, each in time order
        ("", "pod-a", "5.0"),
        ("", "pod-b", "0.0"),
    ]
    assert rows[0]["errors_http_5xx"] == "1" and rows[1]["errors_http_5xx"] == ""


def test_text_a_spreadsheet_would_run_is_quoted_and_nothing_is_an_empty_none() -> None:
    text = to_csv(
        ["name", "value"],
        [{"name": '=HYPERLINK("http://x")', "value": None}, {"name": "+1", "value": 3}],
    )
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1] == ['\'=HYPERLINK("http://x")', ""]
    assert rows[2] == ["'+1", "3"]
