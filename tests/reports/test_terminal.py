"""The verdict table a run prints last: it shows what the judge decided, row for
row, and ends with the exit code and the report's path."""

from __future__ import annotations

import pytest
from reportdata import bucket, realistic_run, run_of

from slogate.analysis.documents.summary import build_summary
from slogate.cli import main
from slogate.reports import write_results
from slogate.reports.terminal import verdict_table

REPORT = "results/run-1/report.html"


def rows_by_slo(table: str) -> dict[str, str]:
    """Each data row of the table, keyed by its 'metric stat' cell."""
    found = {}
    for line in table.splitlines():
        cells = line.split()
        if len(cells) > 2 and cells[0] == "chat":
            found[f"{cells[1]} {cells[2]}"] = line
    return found


@pytest.fixture(scope="module")
def summary() -> dict:
    return build_summary(realistic_run())


def test_every_slo_of_the_summary_is_a_row_with_its_verdict(summary: dict) -> None:
    table = verdict_table(summary, REPORT)
    rows = rows_by_slo(table)
    slos = summary["scenarios"]["chat"]["slo"]
    assert len(rows) == len(slos) > 0
    for slo in slos:
        row = rows[f"{slo['metric']} {slo['stat']}"]
        assert row.rstrip().endswith(slo["verdict"].upper())


def test_a_row_shows_value_interval_threshold_and_margin() -> None:
    values = [float(v) for v in range(1, 1001)]  # p99 = 990 ms, the limit 800: fails by 190
    run = run_of(
        {"chat": bucket({"ttft": values, "e2e": values})},
        slo={"chat": [{"metric": "ttft_ms", "stat": "p99", "limit": 800.0, "kind": "max"}]},
    )
    summary = build_summary(run)
    slo = summary["scenarios"]["chat"]["slo"][0]
    row = rows_by_slo(verdict_table(summary, REPORT))["ttft_ms p99"]
    lower, upper = slo["ci"]
    assert f"{slo['value']:.4g} ms [{lower:.4g}, {upper:.4g}]" in row
    assert "<= 800 ms" in row
    assert f"{slo['margin']:+.4g} ms ({slo['margin_pct']:+.0f}%)" in row
    assert slo["margin"] < 0 and row.rstrip().endswith("FAIL")


def test_the_last_line_is_the_verdict_exit_code_and_report(summary: dict) -> None:
    last = verdict_table(summary, REPORT).splitlines()[-1]
    assert last == f"verdict {summary['verdict'].upper()}, exit {summary['exit_code']}: {REPORT}"


def test_an_invalid_run_says_why_before_the_exit_code() -> None:
    run = run_of({"chat": bucket({"ttft": [10.0] * 50, "e2e": [20.0] * 50})}, complete=False,
                 incomplete_reason="interrupted")  # fmt: skip
    summary = build_summary(run)
    lines = verdict_table(summary, REPORT).splitlines()
    assert summary["exit_code"] == 3
    assert lines[-1].startswith("verdict INVALID, exit 3")
    assert any(line.startswith("invalid: ") for line in lines[:-1])


def test_an_undecided_percentile_names_the_samples_it_needs() -> None:
    run = run_of(
        {"chat": bucket({"ttft": [10.0] * 20, "e2e": [20.0] * 20})},
        slo={"chat": [{"metric": "ttft_ms", "stat": "p99", "limit": 800.0, "kind": "max"}]},
    )
    summary = build_summary(run)
    table = verdict_table(summary, REPORT)
    note = summary["scenarios"]["chat"]["slo"][0]["note"]
    assert "INCONCLUSIVE" in table and note and f"chat ttft_ms p99: {note}" in table


def test_a_run_without_slos_says_so() -> None:
    summary = build_summary(run_of({"chat": bucket({"ttft": [10.0] * 50, "e2e": [20.0] * 50})}))
    assert verdict_table(summary, REPORT).splitlines()[0].startswith("no SLO declared")


def test_slogate_report_prints_the_table_of_the_folder_it_rebuilt(tmp_path, capsys) -> None:
    run = realistic_run()
    run.save(tmp_path)
    outcome = write_results(tmp_path, run)
    code = main(["report", str(tmp_path)])
    printed = capsys.readouterr().out
    assert code == outcome.exit_code
    assert printed == verdict_table(outcome.summary, tmp_path / "report.html") + "\n"
