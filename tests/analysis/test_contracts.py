"""The documents slogate writes hold to their published JSON Schemas, and a
document that does not is refused with the field that is wrong."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from loadruns import slogate
from pydantic import BaseModel
from reportdata import realistic_run

from slogate.analysis.documents.contracts import (
    BaselineError,
    Comparison,
    ContractError,
    Summary,
    parse,
    read_document,
)
from slogate.analysis.documents.history import read_runs
from slogate.cli import main
from slogate.reports import write_results
from slogate.reports.results import render_run


def published(name: str, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["schema", name]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_a_real_runs_summary_validates_against_the_published_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    done = slogate("run", "chat", "--duration", "4s", "--out", str(out))
    assert done.returncode in (0, 1, 3, 4), done.stderr
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.validate(summary, published("summary", capsys))
    run_file = json.loads((out / "data" / "run.json").read_text())
    jsonschema.validate(run_file, published("run-data", capsys))


def test_a_written_summary_validates_and_a_broken_one_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_results(tmp_path / "good", realistic_run(n=200))
    summary = json.loads((tmp_path / "good" / "summary.json").read_text())
    schema = published("summary", capsys)
    jsonschema.validate(summary, schema)

    summary["scenarios"]["chat"]["slo"][0]["verdict"] = "maybe"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(summary, schema)
    broken = tmp_path / "broken" / "summary.json"
    broken.parent.mkdir()
    broken.write_text(json.dumps(summary))
    with pytest.raises(ContractError, match=r"scenarios\.chat\.slo\.0\.verdict"):
        read_document(Summary, broken)
    unreadable: list[str] = []
    assert [r.folder.name for r in read_runs(tmp_path, unreadable)] == ["good"]
    assert unreadable == ["broken"]


def test_every_document_has_a_schema_and_an_unknown_name_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, schema in (
        ("sweep", "slogate.sweep/1"),
        ("experiment", "slogate.experiment/1"),
        ("tune", "slogate.tune/1"),
    ):
        assert published(name, capsys)["properties"]["schema"]["const"] == schema
    assert main(["schema", "nonsense"]) == 2
    assert "no document called 'nonsense'" in capsys.readouterr().err


def untyped_keys(model: BaseModel, path: str = "") -> list[str]:
    """The keys of a parsed document that its contract does not type, by path."""
    found = [path + key for key in model.model_extra or {}]
    for name, value in model:
        if isinstance(value, dict):
            parts = {f"{name}.{key}": item for key, item in value.items()}
        elif isinstance(value, list):
            parts = {f"{name}.{index}": item for index, item in enumerate(value)}
        else:
            parts = {name: value}
        for where, part in parts.items():
            if isinstance(part, BaseModel):
                found += untyped_keys(part, f"{path}{where}.")
    return found


def test_every_key_the_summary_writer_writes_is_typed_but_the_generators_metadata(
    tmp_path: Path,
) -> None:
    base, new = realistic_run(n=400, seed=1), realistic_run(n=400, seed=2, scale=1.5)
    compared = write_results(tmp_path / "compared", new, baseline=base)
    summary = parse(Summary, compared.summary, "summary")
    assert isinstance(summary.baseline, Comparison) and summary.baseline.deltas
    untyped = untyped_keys(summary)
    assert "generator.lag_p99_ms" in untyped
    assert [key for key in untyped if not key.startswith("generator.")] == []

    failed = render_run(tmp_path / "failed", new, None, 0.05, baseline_error="baseline gone")
    error = parse(Summary, failed.summary, "summary").baseline
    assert isinstance(error, BaselineError) and error.error == "baseline gone"
