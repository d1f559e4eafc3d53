"""llm-d's Benchmark Report: a slogate load point maps onto llm-d's schema, and
a report that breaks it is named field by field (the export's round trips are
tests/reports/test_folder_export.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slogate.analysis.documents.contracts import Summary, read_document
from slogate.reports.folder_export import run_points
from slogate.reports.llmd_report import VERSION, problems, report

RUN = Path(__file__).parents[1] / "data" / "tune_from" / "simulated-max-num-seqs-3"


def read_back_example() -> dict[str, Any]:
    summary = read_document(Summary, RUN / "summary.json")
    (_, point), *_ = run_points(summary)
    document = report(point)
    assert problems(document) == []
    return document


def test_a_run_maps_onto_the_schema_with_its_engine_as_a_generic_component() -> None:
    document = read_back_example()
    assert document["version"] == VERSION == "0.2.1"
    (engine,) = document["scenario"]["stack"]
    assert engine["standardized"]["kind"] == "generic"
    assert engine["standardized"]["tool"] == "slogate-simengine"
    assert engine["standardized"]["model"] == "meta-llama/Llama-3.1-8B-Instruct"


def test_a_report_that_breaks_the_schema_is_named_field_by_field() -> None:
    document = json.loads(json.dumps(read_back_example()))
    latency = document["results"]["request_performance"]["aggregate"]["latency"]
    latency["time_to_first_token"]["units"] = "fortnights"
    del document["run"]["uid"]
    found = problems(document)
    assert any(line.startswith("results.request_performance.aggregate.latency") for line in found)
    assert any("'uid' is a required property" in line for line in found)
