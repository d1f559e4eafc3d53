"""CI outputs of a run: summary.md (and $GITHUB_STEP_SUMMARY), metrics.prom and its push."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway import Pushes, gateway
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from prometheus_client.parser import text_string_to_metric_families as text_families
from reportdata import HOSTILE, realistic_run

from slogate.analysis.documents.rundata import RunData
from slogate.reports import write_results
from slogate.reports.markdown import append_step_summary, md
from slogate.reports.openmetrics import push_metrics


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run 30% slower than its baseline, every SLO still met."""
    root = tmp_path_factory.mktemp("runs")
    base = realistic_run(seed=5)
    base.meta["run_id"] = "base-run"
    base.save(root / "base")
    write_results(root / "base", base)
    new = realistic_run(seed=6, scale=1.3)
    new.meta["run_id"] = "new-run"
    new.meta["engine"] = {"owned_by": "vllm", "model": "m|odel\n" + HOSTILE[:40]}
    write_results(root / "new", new, RunData.load(root / "base"))
    return root / "new"


def test_a_regression_against_the_baseline_makes_the_exit_code_1(regressed: Path) -> None:
    text = (regressed / "summary.md").read_text()
    assert text.splitlines()[0].endswith("PASS, REGRESSION against the baseline (exit 1)")
    assert "Against baseline **base-run**: regression" in text
    assert "| chat | ttft\\_ms p99 |" in text
    assert "[Full report](report.html)" in text


def test_summary_table_has_value_threshold_margin_and_interval(regressed: Path) -> None:
    summary = json.loads((regressed / "summary.json").read_text())
    slo = summary["scenarios"]["chat"]["slo"][0]
    rows = [r for r in (regressed / "summary.md").read_text().splitlines() if "| 2,000 ms |" in r]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[1] == "ttft\\_ms p99"
    assert cells[4].endswith(f"({slo['margin_pct']:+.1f}%)")
    assert cells[5].startswith("[") and cells[6] == str(slo["n"]) and cells[7].endswith("pass")


def test_server_text_cannot_break_the_markdown(regressed: Path) -> None:
    text = (regressed / "summary.md").read_text()
    target = next(line for line in text.splitlines() if line.startswith("Target:"))
    assert "<script>" not in text and "\\<script\\>" in target
    assert "m\\|odel" in target
    assert md("a|b\nc") == "a\\|b c"


def test_step_summary_is_appended_only_when_set(tmp_path: Path) -> None:
    path = tmp_path / "step.md"
    path.write_text("earlier step\n")
    assert append_step_summary("## run", {}) is None
    assert append_step_summary("## run", {"GITHUB_STEP_SUMMARY": str(path)}) == path
    assert path.read_text() == "earlier step\n## run\n"


def samples(text: str) -> dict[str, list]:
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def test_metrics_parse_as_openmetrics_with_the_run_labels(regressed: Path) -> None:
    summary = json.loads((regressed / "summary.json").read_text())
    text = (regressed / "metrics.prom").read_text()
    assert text.endswith("# EOF\n")
    families = samples(text)
    slo = summary["scenarios"]["chat"]["slo"][0]
    values = {s.labels["slo"]: s for s in families["slogate_slo_value"]}
    ttft = values["ttft_ms:p99"]
    assert ttft.value == pytest.approx(slo["value"])
    assert ttft.labels["unit"] == "ms" and ttft.labels["scenario"] == "chat"
    assert ttft.labels["engine"] == "vllm" and ttft.labels["revision"] == "abc123"
    assert ttft.labels["model"].startswith("m|odel\n")
    thresholds = {s.labels["slo"]: s.value for s in families["slogate_slo_threshold"]}
    assert thresholds == {"ttft_ms:p99": 2000.0, "itl_ms:p95": 60.0, "error_rate:max": 0.01}
    states = {
        s.labels["slogate_verdict"]: s.value
        for s in families["slogate_verdict"]
        if s.labels["scenario"] == "chat"
    }
    assert states == {"pass": 1.0, "fail": 0.0, "inconclusive": 0.0, "invalid": 0.0}
    p99 = {
        s.labels["metric"]: s.value
        for s in families["slogate_latency_seconds"]
        if s.labels["quantile"] == "0.99"
    }
    assert p99["ttft"] == pytest.approx(
        summary["scenarios"]["chat"]["metrics"]["ttft_ms"]["p99"] / 1000
    )
    rates = {s.labels["what"]: s.value for s in families["slogate_throughput_per_second"]}
    assert rates["requests"] == pytest.approx(
        summary["scenarios"]["chat"]["throughput"]["requests_per_s"]
    )
    assert "goodput_requests" in rates
    goodput = families["slogate_goodput_ratio"][0].value
    assert goodput == pytest.approx(summary["scenarios"]["chat"]["goodput"]["fraction"])
    assert families["slogate_exit_code"][0].value == 1
    assert families["slogate_regressions"][0].value >= 1


@pytest.fixture
def pushes() -> Iterator[Pushes]:
    with gateway() as stand_in:
        yield stand_in


def test_push_puts_the_run_to_the_gateway(regressed: Path, pushes: Pushes) -> None:
    summary = json.loads((regressed / "summary.json").read_text())
    push_metrics(summary, pushes.url)
    [(method, path, body)] = pushes.received
    assert method == "PUT" and path == "/metrics/job/slogate/instance/chat"
    pushed = {f.name: f.samples for f in text_families(body.decode())}
    values = {s.labels["slo"]: s.value for s in pushed["slogate_slo_value"]}
    assert values["ttft_ms:p99"] == pytest.approx(summary["scenarios"]["chat"]["slo"][0]["value"])


def test_a_refused_push_names_the_gateway(regressed: Path, pushes: Pushes) -> None:
    pushes.status = 400
    with pytest.raises(OSError, match=r"--push-metrics http://127\.0\.0\.1:\d+: .*400"):
        push_metrics(json.loads((regressed / "summary.json").read_text()), pushes.url)
