"""slogate export: llm-d Benchmark Reports v0.2.1 of a run, a sweep and a tune,
read back, validated against llm-d's own JSON Schema and checked number for
number against the slogate documents they came from; and the CSVs."""

from __future__ import annotations

import csv
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from slogate.reports.llmd_report import SCHEMA_FILE

DATA = Path(__file__).parents[1] / "data"
RUN = DATA / "tune_from" / "simulated-max-num-seqs-3"
STUDIES = DATA / "study_docs"
SCHEMA = json.loads(SCHEMA_FILE.read_text())
# slogate's names -> the report's, as the export maps them
LATENCIES = {
    "ttft_ms": "time_to_first_token",
    "tpot_ms": "time_per_output_token",
    "itl_ms": "inter_token_latency",
    "e2e_ms": "request_latency",
}
STATS = {"mean": "mean", "min": "min", "p50": "p50", "p90": "p90", "p95": "p95",
         "p99": "p99", "p999": "p99p9", "max": "max"}  # fmt: skip


def export(folder: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "slogate.cli", "export", str(folder), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def read_back(path: Path) -> dict[str, Any]:
    """The file as another tool reads it: JSON, then llm-d's schema."""
    document = json.loads(path.read_text())
    schema_validator().validate(document)
    return document


@functools.cache
def schema_validator() -> jsonschema.Draft202012Validator:
    """llm-d's schema, checked once (``jsonschema.validate`` checks it again on
    every call: 0.6 s each, most of this file's time)."""
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    return jsonschema.Draft202012Validator(SCHEMA)


def assert_same_numbers(report: dict[str, Any], block: dict[str, Any]) -> None:
    """Every latency statistic, the request counts and the throughputs equal
    the slogate block's (a run's scenario or a sweep's point)."""
    aggregate = report["results"]["request_performance"]["aggregate"]
    for ours, theirs in LATENCIES.items():
        stats = aggregate["latency"][theirs]
        assert stats["units"] in ("ms", "ms/token")
        for key, their_key in STATS.items():
            assert stats[their_key] == block["metrics"][ours][key], (ours, key)
    assert aggregate["requests"]["total"] == block["requests"]["total"]
    assert aggregate["requests"]["failures"] == block["requests"]["failed"]
    throughput = aggregate["throughput"]
    assert throughput["request_rate"]["mean"] == block["throughput"]["requests_per_s"]
    assert throughput["output_token_rate"]["mean"] == block["throughput"]["output_tokens_per_s"]
    assert throughput["input_token_rate"]["mean"] == block["throughput"]["input_tokens_per_s"]


def test_a_runs_scenario_exports_as_a_valid_report_with_the_summarys_numbers(tmp_path):
    done = export(RUN, "--format", "llm-d-report", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    summary = json.loads((RUN / "summary.json").read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{n}.json" for n in summary["scenarios"]]
    for name, block in summary["scenarios"].items():
        report = read_back(tmp_path / f"{name}.json")
        assert report["version"] == "0.2.1"
        assert_same_numbers(report, block)
        requests = report["results"]["request_performance"]["aggregate"]["requests"]
        per_request = block["tokens"]["per_request"]
        assert requests["input_length"]["p99"] == per_request["input_tokens"]["p99"]
        assert requests["output_length"]["mean"] == per_request["output_tokens"]["mean"]
        load = report["scenario"]["load"]["standardized"]
        assert (load["tool"], load["concurrency"]) == ("slogate", block["load"]["users"])
        assert load["input_seq_len"] == {"distribution": "uniform", "value": 600.0,
                                         "min": 300, "max": 900}  # fmt: skip
        assert report["run"]["time"]["start"] == summary["run"]["started_at"]


def test_a_run_exported_twice_from_two_copies_has_one_uid(tmp_path):
    shutil.copytree(RUN, tmp_path / "copy")
    for folder in (RUN, tmp_path / "copy"):
        out = tmp_path / "out" / folder.name
        assert export(folder, "--format", "llm-d-report", "--out", str(out)).returncode == 0
    uids = {read_back(p)["run"]["uid"] for p in (tmp_path / "out").glob("*/diag.json")}
    assert len(uids) == 1


def test_a_sweep_exports_one_report_per_load_point(tmp_path):
    folder = tmp_path / "sweep"
    shutil.copytree(STUDIES / "sweep", folder)
    done = export(folder, "--format", "llm-d-report")
    assert done.returncode == 0, done.stderr
    sweep = json.loads((folder / "sweep.json").read_text())
    written = sorted((folder / "llm-d-report").iterdir())
    assert [p.name for p in written] == ["01-rate-4.json", "02-rate-8.json"]
    experiments = set()
    for stage, (path, point) in enumerate(zip(written, sweep["points"], strict=True)):
        report = read_back(path)
        assert_same_numbers(report, point)
        load = report["scenario"]["load"]["standardized"]
        assert (load["rate_qps"], load["stage"]) == (point["x"], stage)
        experiments.add(report["run"]["eid"])
    assert len(experiments) == 1


def test_a_tune_exports_each_treatments_load_points(tmp_path):
    done = export(STUDIES / "tune", "--format", "llm-d-report", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    tune = json.loads((STUDIES / "tune" / "tune.json").read_text())
    count = 0
    for treatment in tune["treatments"]:
        sweep = json.loads((STUDIES / "tune" / treatment["sweep"] / "sweep.json").read_text())
        folder = tmp_path / Path(treatment["sweep"]).parent.name
        written = sorted(folder.iterdir())
        assert len(written) == len(sweep["points"]) > 0
        for path, point in zip(written, sweep["points"], strict=True):
            assert_same_numbers(read_back(path), point)
            count += 1
    assert len(done.stdout.splitlines()) == count


def test_a_folder_that_is_no_results_exits_2_naming_it(tmp_path):
    done = export(tmp_path, "--format", "llm-d-report")
    assert done.returncode == 2
    assert str(tmp_path) in done.stderr and "not a run, sweep or tune folder" in done.stderr
    (tmp_path / "summary.json").write_text('{"schema": "something else"}')
    done = export(tmp_path, "--format", "csv")
    assert done.returncode == 2 and "summary.json" in done.stderr


@pytest.mark.parametrize(
    ("folder", "files"),
    [(RUN, ["percentiles.csv"]), (STUDIES / "sweep", ["points.csv", "runs.csv"]),
     (STUDIES / "tune", ["treatments.csv"])],
)  # fmt: skip
def test_csv_export_writes_the_folders_own_tables(tmp_path, folder, files):
    done = export(folder, "--format", "csv", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    rows = list(csv.DictReader((tmp_path / files[0]).open()))
    assert rows
    if folder == RUN:
        summary = json.loads((RUN / "summary.json").read_text())
        ttft = next(r for r in rows if r["metric"] == "ttft_ms" and r["span"] == "all")
        assert float(ttft["p99"]) == summary["scenarios"]["diag"]["metrics"]["ttft_ms"]["p99"]


def test_names_from_an_edited_document_stay_inside_the_export_folder(tmp_path):
    folder = tmp_path / "sweep"
    shutil.copytree(STUDIES / "sweep", folder)
    sweep = json.loads((folder / "sweep.json").read_text())
    sweep["points"][0]["label"] = "../../escaped"
    (folder / "sweep.json").write_text(json.dumps(sweep))
    done = export(folder, "--format", "llm-d-report", "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "01-rate-.._.._escaped.json",
        "02-rate-8.json",
    ]
    assert not list(tmp_path.glob("escaped*"))
