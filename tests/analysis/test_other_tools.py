"""Other tools' results as baselines: a GuideLLM report (made by GuideLLM,
kept in tests/data/other_tools) and vLLM bench serve results read by content;
slogate compare against them, each statistic under the tool's own name; the
history dashboard draws them; a file of neither tool exits 2 naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from reportdata import bucket, chat_run, lognormal_ms, run_of

from slogate.analysis.documents.other_tools import (
    GUIDELLM,
    VLLM,
    NotOtherResult,
    OtherRun,
    OtherStat,
    exact,
    read_other,
)
from slogate.analysis.measurement.percentiles import STANDARD_PERCENTILES
from slogate.analysis.verdict.compare import (
    EXIT_NO_REGRESSION,
    EXIT_REGRESSION,
    WORSE,
    compare_other,
    latency_estimate,
)
from slogate.reports import comparison_text, write_index, write_results

DATA = Path(__file__).parents[1] / "data" / "other_tools"
GUIDELLM_FILE = DATA / "guidellm-0.8.1-benchmarks.json"
VLLM_FILE = DATA / "vllm-bench-serve-0.32.0.json"


def guidellm_doc() -> dict[str, Any]:
    return json.loads(GUIDELLM_FILE.read_text())


def slogate(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "slogate.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def test_a_guidellm_report_gives_its_percentiles_intervals_and_rates_in_ms() -> None:
    other = read_other(str(GUIDELLM_FILE))
    metrics = guidellm_doc()["benchmarks"][0]["metrics"]
    assert other.tool == GUIDELLM
    ttft = metrics["time_to_first_token_ms"]["successful"]
    p99 = other.stat("ttft_ms", "p99")
    assert p99 is not None and p99.estimate.value == ttft["percentiles"]["p99"]
    assert other.label(p99) == "GuideLLM: time_to_first_token_ms p99"
    median = other.stat("ttft_ms", "p50")
    ci = ttft["percentile_cis"]["p50"]
    assert median is not None
    assert (median.estimate.lower, median.estimate.upper) == (ci["lower"], ci["upper"])
    assert median.estimate.count == ttft["count"] == 20
    seconds = metrics["request_latency"]["successful"]["percentiles"]["p90"]
    e2e = other.stat("e2e_ms", "p90")
    assert e2e is not None and e2e.estimate.value == pytest.approx(seconds * 1000)
    # GuideLLM's inter-token latency is a request's (last - first) / (tokens - 1): TPOT
    tpot = other.stat("tpot_ms", "p50")
    assert tpot is not None and tpot.name == "inter_token_latency_ms p50"
    assert other.stat("itl_ms", "p50") is None
    rate = other.stat("requests_per_s", "run")
    assert rate is not None
    assert rate.estimate.value == metrics["requests_per_second"]["successful"]["mean"]
    errors = other.stat("error_rate", "rate")
    assert errors is not None and errors.estimate.value == 0.0


def test_a_guidellm_report_of_several_benchmarks_names_one_with_a_hash(tmp_path: Path) -> None:
    doc = guidellm_doc()
    second = json.loads(json.dumps(doc["benchmarks"][0]))
    second["metrics"]["time_to_first_token_ms"]["successful"]["percentiles"]["p99"] = 99.5
    doc["benchmarks"].append(second)
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(NotOtherResult, match=r"2 results: name one as .*sweep.json#K"):
        read_other(str(path))
    chosen = read_other(f"{path}#2").stat("ttft_ms", "p99")
    assert chosen is not None and chosen.estimate.value == 99.5
    with pytest.raises(NotOtherResult, match="report of 2 result"):
        read_other(f"{path}#3")


def test_a_vllm_bench_serve_result_gives_each_percentile_it_saved() -> None:
    other = read_other(str(VLLM_FILE))
    saved = json.loads(VLLM_FILE.read_text())
    assert other.tool == VLLM
    theirs = {"ttft_ms": "ttft", "tpot_ms": "tpot", "itl_ms": "itl", "e2e_ms": "e2el"}
    found = {(s.metric, s.stat): s for s in other.latencies}
    assert set(found) == {(m, p) for m in theirs for p in ("p50", "p90", "p99")}
    for (metric, stat), s in found.items():
        assert s.name == f"{stat}_{theirs[metric]}_ms"
        assert s.estimate.value == saved[s.name]
        assert s.estimate.count == saved["completed"] == 8
    rates = {s.metric: s.estimate.value for s in other.rates}
    assert rates == {"error_rate": 0.0, "requests_per_s": saved["request_throughput"],
                     "output_tokens_per_s": saved["output_throughput"]}  # fmt: skip


def vllm_result(**changes: Any) -> dict[str, Any]:
    """The keys vLLM 0.32's serve.py saves with --save-result (the values made up)."""
    result = {
        "date": "20261208-004500", "endpoint_type": "openai", "backend": "openai",
        "label": None, "model_id": "m", "tokenizer_id": "m", "num_prompts": 10,
        "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 2, "duration": 5.0,
        "completed": 9, "failed": 1, "total_input_tokens": 640, "total_output_tokens": 160,
        "request_throughput": 1.8, "request_goodput": None, "output_throughput": 32.0,
        "total_token_throughput": 160.0, "max_output_tokens_per_s": 40.0,
        "max_concurrent_requests": 2, "rtfx": 0.0,
        "mean_ttft_ms": 50.0, "median_ttft_ms": 45.0, "std_ttft_ms": 5.0,
        "p99_ttft_ms": 80.0, "p99.9_ttft_ms": 90.0,
        "mean_itl_ms": 9.0, "median_itl_ms": 8.0, "std_itl_ms": 1.0, "p99_itl_ms": 20.0,
    }  # fmt: skip
    return {**result, **changes}


def test_a_vllm_result_is_told_by_its_content_whatever_its_name(tmp_path: Path) -> None:
    path = tmp_path / "anything.txt"
    path.write_text(json.dumps(vllm_result()))
    other = read_other(str(path))
    assert other.tool == VLLM
    found = {(s.metric, s.stat): (s.name, s.estimate.value) for s in other.latencies}
    assert found == {
        ("ttft_ms", "p50"): ("median_ttft_ms", 45.0),
        ("ttft_ms", "p99"): ("p99_ttft_ms", 80.0),
        ("ttft_ms", "p999"): ("p99.9_ttft_ms", 90.0),
        ("itl_ms", "p50"): ("median_itl_ms", 8.0),
        ("itl_ms", "p99"): ("p99_itl_ms", 20.0),
    }
    errors = other.stat("error_rate", "rate")
    assert errors is not None and errors.estimate.value == pytest.approx(0.1)
    # a value without an interval counts as exact
    p99 = other.stat("ttft_ms", "p99")
    assert p99 is not None and p99.estimate.lower == p99.estimate.upper == 80.0


def test_results_appended_to_one_vllm_file_are_named_with_a_hash(tmp_path: Path) -> None:
    path = tmp_path / "nightly.json"
    lines = [json.dumps(vllm_result(p99_ttft_ms=v)) for v in (80.0, 95.0, 70.0)]
    path.write_text("\n".join(lines))
    with pytest.raises(NotOtherResult, match=r"--append-result of 3 results: name one as"):
        read_other(str(path))
    second = read_other(f"{path}#2").stat("ttft_ms", "p99")
    assert second is not None and second.estimate.value == 95.0


def test_a_vllm_result_before_failed_was_saved_counts_the_prompts_not_completed(
    tmp_path: Path,
) -> None:
    doc = vllm_result()
    del doc["failed"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    errors = read_other(str(path)).stat("error_rate", "rate")
    assert errors is not None and errors.estimate.value == pytest.approx(0.1)


def as_other(run_scale: float, seed: int) -> OtherRun:
    """A baseline file's numbers: the TTFT percentiles of a slogate run, as another
    tool would report them (exact values, no intervals)."""
    run = chat_run(run_scale, seed=seed)
    stats = []
    for stat, p in STANDARD_PERCENTILES.items():
        e = latency_estimate(run, "chat", "ttft", p)
        assert e is not None
        stats.append(OtherStat("ttft_ms", stat, f"p{stat[1:]}_ttft_ms", exact(e.value, e.count)))
    return OtherRun(VLLM, "base.json", tuple(stats), ())


def test_compare_flags_a_planted_regression_against_another_tools_numbers() -> None:
    result = compare_other(as_other(1.0, seed=1), chat_run(1.2, seed=2))
    p99 = next(d for d in result.deltas if (d.metric, d.stat) == ("ttft_ms", "p99"))
    assert p99.status == WORSE and p99.regression
    assert p99.base_name == "vLLM bench serve: p99_ttft_ms"
    assert result.exit_code == EXIT_REGRESSION
    text = comparison_text(result)
    assert "chat ttft_ms p99 [vLLM bench serve: p99_ttft_ms]" in text
    assert "baseline vLLM bench serve base.json" in text
    same = compare_other(as_other(1.0, seed=1), chat_run(1.0, seed=2))
    assert same.exit_code == EXIT_NO_REGRESSION and not same.regressions


def test_slogate_compare_takes_the_guidellm_report_as_base(tmp_path: Path) -> None:
    chat_run(1.0, seed=3).save(tmp_path / "new")
    done = slogate("compare", str(GUIDELLM_FILE), str(tmp_path / "new"), "--all")
    assert done.returncode in (0, 1, 3), done.stderr
    assert "[GuideLLM: time_to_first_token_ms p99]" in done.stdout
    assert "[GuideLLM: request_latency p50]" in done.stdout
    document = json.loads((tmp_path / "new" / "comparison.json").read_text())
    names = {d["base_name"] for d in document["deltas"]}
    assert "GuideLLM: requests_per_second mean" in names
    assert document["base_run"] == f"GuideLLM {GUIDELLM_FILE}"


@pytest.mark.parametrize(
    ("content", "says"),
    [('{"results": []}', "not a results folder, a vLLM bench serve result or a GuideLLM report"),
     ("not json at all", "not JSON")],
)  # fmt: skip
def test_a_base_file_of_no_known_tool_exits_2_naming_it(
    tmp_path: Path, content: str, says: str
) -> None:
    base = tmp_path / "mystery.json"
    base.write_text(content)
    done = slogate("compare", str(base), str(tmp_path / "new"))
    assert done.returncode == 2
    assert str(base) in done.stderr and says in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_history_dashboard_draws_other_tools_baselines(tmp_path: Path) -> None:
    slo = [{"metric": "ttft_ms", "stat": "p99", "kind": "max", "limit": 2000.0}]
    ttft = lognormal_ms(300, 0.5, 2000, seed=4)
    write_results(tmp_path / "run-1", run_of({"chat": bucket({"ttft": ttft})}, slo={"chat": slo}))
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "guidellm.json").write_text(GUIDELLM_FILE.read_text())
    (tmp_path / "baselines" / "notes.json").write_text("{}")
    page = write_index(tmp_path)
    assert page is not None
    html = page.read_text()
    p99 = guidellm_doc()["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]
    assert "GuideLLM: time_to_first_token_ms p99" in html
    assert f"{p99['percentiles']['p99']:.2f}"[:4] in html
    assert "a GuideLLM report of one benchmark): baselines/notes.json" in html
