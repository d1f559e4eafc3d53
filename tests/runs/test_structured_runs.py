"""Structured outputs end to end (issue 40, item 2): a run against the
simulated engine, which follows each schema, reports validity 100% with the
constrained/unconstrained split and the compile gap; the same engine told to
break a share of its answers fails the gate, with the broken answers
counted and named in summary.json, the report, summary.md and JUnit."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from loadruns import slogate, summary
from structured_cases import structured_scenario

from slogate.analysis.verdict.exitcodes import EXIT_FAIL, EXIT_PASS
from slogate.engines.simulated import start_engine

pytestmark = pytest.mark.slow


def junit_case(out: Path, name: str) -> ET.Element:
    [case] = [c for c in ET.parse(out / "junit.xml").iter("testcase") if c.get("name") == name]
    return case


def test_an_engine_that_follows_the_schemas_passes_with_the_split_and_the_gap(tmp_path):
    out = tmp_path / "out"
    done = slogate("run", str(structured_scenario(tmp_path)), "--out", str(out))
    assert done.returncode == EXIT_PASS, done.stderr[-3000:]
    so_block = summary(out)["scenarios"]["so"]
    so = so_block["structured_output"]
    ok = so_block["requests"]["ok"]
    assert so["validity"] == 1.0 and so["invalid"] == 0 and so["constrained"] > 10
    assert so["ttft_constrained_ms"]["count"] + so["ttft_unconstrained_ms"]["count"] == ok
    assert so["tpot_constrained_ms"]["count"] == so["constrained"]
    # two pooled schemas, one load process: two compiles, the rest cached
    assert so["schema_first"] == so["ttft_schema_first_ms"]["count"] == 2
    assert so["ttft_schema_cached_ms"]["count"] == so["constrained"] - 2
    assert so["compile_gap_ms"] > 25  # the engine's 50 ms compile, less the noise
    [slo] = so_block["slo"]
    assert (slo["metric"], slo["verdict"], slo["value"]) == ("schema_validity", "pass", 1.0)
    report = (out / "report.html").read_text()
    assert 'id="structured-1"' in report and "grammar compile gap" in report
    assert "schema validity 100.00%" in (out / "summary.md").read_text()


def test_an_engine_that_breaks_a_share_fails_the_gate_naming_the_answers(tmp_path):
    out = tmp_path / "out"
    with start_engine(faults={"invalid_json_rate": 0.3}) as engine:
        done = slogate(
            "run", str(structured_scenario(tmp_path)), "--host", engine.url, "--out", str(out)
        )
    assert done.returncode == EXIT_FAIL, done.stderr[-3000:]
    so_block = summary(out)["scenarios"]["so"]
    so = so_block["structured_output"]
    assert so_block["requests"]["failed"] == 0  # a broken answer is no failed request
    assert so["invalid"] > 0 and so["valid"] > 0
    assert so["validity"] == pytest.approx(so["valid"] / so["constrained"], abs=1e-6)
    assert so["invalid_samples"] and all("not JSON: " in s for s in so["invalid_samples"])
    assert so["invalid_samples"][0].startswith("conversation ")
    [slo] = so_block["slo"]
    assert (slo["metric"], slo["verdict"]) == ("schema_validity", "fail")
    assert junit_case(out, "schema_validity fraction >= 0.99").find("failure") is not None
    report = (out / "report.html").read_text()
    assert "Answers that broke their schema" in report
    assert "schema_validity" in done.stdout and "FAIL" in done.stdout
