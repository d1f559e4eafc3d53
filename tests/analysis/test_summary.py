"""summary.json: docs/design.md's contract keys, units, empty metrics, secrets masked."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from reportdata import bucket, realistic_run, run_of

from slogate.analysis.documents.summary import SCHEMA, build_summary, redact, redact_text, slo_entry
from slogate.analysis.engine_side.server_metrics import Histogram
from slogate.analysis.measurement.recorder import Bucket
from slogate.analysis.verdict.judge import judge
from slogate.reports import write_results

CONTRACT_STATS = ("count", "p50", "p90", "p95", "p99", "p999", "max", "mean")


@pytest.fixture(scope="module")
def summary() -> dict:
    return build_summary(realistic_run())


def test_contract_keys(summary: dict) -> None:
    assert summary["schema"] == SCHEMA == "slogate.summary/1"
    assert summary["verdict"] in ("pass", "fail", "inconclusive", "invalid")
    chat = summary["scenarios"]["chat"]
    assert set(chat["requests"]) >= {"ok", "failed", "errors"}
    assert chat["requests"]["errors"] == {"http_5xx": 7, "timeout_stall": 2}
    assert set(chat["tokens"]) >= {"input", "output", "count_method"}
    for metric in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        assert set(chat["metrics"][metric]) >= set(CONTRACT_STATS)
    assert set(chat["throughput"]) >= {"requests_per_s", "output_tokens_per_s"}
    for entry in chat["slo"]:
        assert set(entry) >= {"metric", "stat", "threshold", "value", "verdict"}
    json.dumps(summary, allow_nan=False)


def test_times_are_milliseconds_with_intervals() -> None:
    values = [float(v) for v in range(1, 1001)]
    s = build_summary(run_of({"a": bucket({"ttft": values, "e2e": values})}))
    ttft = s["scenarios"]["a"]["metrics"]["ttft_ms"]
    assert ttft["count"] == 1000
    assert ttft["p50"] == pytest.approx(500.0, rel=1e-3)
    assert ttft["max"] == pytest.approx(1000.0, rel=1e-3)
    assert ttft["mean"] == pytest.approx(500.5, rel=1e-3)
    lower, upper = ttft["ci"]["p99"]
    assert lower <= ttft["p99"] <= upper
    assert s["scenarios"]["a"]["throughput"]["requests_per_s"] == pytest.approx(1000 / 60.0, 1e-3)


def test_metric_without_samples_has_nulls_not_zeros() -> None:
    s = build_summary(run_of({"a": bucket({"e2e": [5.0]})}))
    tpot = s["scenarios"]["a"]["metrics"]["tpot_ms"]
    assert tpot["count"] == 0
    assert all(tpot[k] is None for k in CONTRACT_STATS if k != "count")


def test_workload_tokens_methods_and_deviation(summary: dict) -> None:
    tokens = summary["scenarios"]["chat"]["tokens"]
    assert tokens["count_method"] == "usage"
    assert tokens["approximate"] is False
    assert tokens["deviation_pct"]["output"] == pytest.approx(-6.25)
    assert tokens["per_request"]["output_tokens"]["p50"] == 120
    assert tokens["chunk_token_method"] == "proportional"


def test_the_least_exact_count_method_wins() -> None:
    b = bucket({"e2e": [5.0, 6.0]})
    b.counters.count_methods.update(usage=1, chunks=1)
    tokens = build_summary(run_of({"a": b}))["scenarios"]["a"]["tokens"]
    assert tokens["count_method"] == "chunks"
    assert tokens["approximate"] is True


def test_scheduled_turns_stages_goodput(summary: dict) -> None:
    chat = summary["scenarios"]["chat"]
    assert chat["metrics"]["ttft_sched_ms"]["p50"] > chat["metrics"]["ttft_ms"]["p50"]
    assert list(chat["ttft_by_turn_ms"]) == ["1", "2"]
    assert set(chat["stages"]) == {"warm", "hot"}
    assert chat["stages"]["hot"]["metrics"]["ttft_ms"]["count"] == 2000
    assert chat["goodput"]["fraction"] == pytest.approx(3880 / 4009, abs=1e-6)


def test_turns_sort_numerically_and_stage_rates_use_the_planned_duration() -> None:
    b = bucket({"ttft": [1.0], "e2e": [1.0], "ttft_turn_10": [1.0], "ttft_turn_2": [1.0]})
    run = run_of({"a": b})
    run.meta["scenarios"]["a"]["load"] = {"stages": [{"name": "s1", "duration_s": 4.0}]}
    run.buckets[("a", "stage:s1")] = bucket({"e2e": [1.0] * 8})
    s = build_summary(run)["scenarios"]["a"]
    assert list(s["ttft_by_turn_ms"]) == ["2", "10"]
    assert s["stages"]["s1"]["throughput"]["requests_per_s"] == pytest.approx(2.0)


def test_secrets_are_masked_everywhere_in_the_summary() -> None:
    run = run_of(
        {
            "a": bucket(
                {"e2e": [1.0]},
                failed={"http_4xx": 1},
                error_samples={"http_4xx": ["bad key sk-live1234567890abcdef"]},
            )
        },
        command="slogate run chat.yaml --api-key hunter2secret --host http://u:pw0rd@h:1",
        host="http://user:pa55word@example.invalid:8000/v1?api_key=qwerty123",
    )
    run.meta["scenarios"]["a"]["raw"] = {
        "request": {"api_key": "plainkey999", "api_key_env": "OPENAI_API_KEY", "max_tokens": 64},
        "headers": {"Authorization": "Bearer tok-abc-123456"},
    }
    text = json.dumps(build_summary(run))
    for secret in (
        "hunter2secret",
        "pw0rd",
        "pa55word",
        "qwerty123",
        "plainkey999",
        "tok-abc-123456",
        "sk-live1234567890abcdef",
    ):
        assert secret not in text
    assert "OPENAI_API_KEY" in text
    assert '"max_tokens": 64' in text


def test_redaction_leaves_ordinary_text_alone() -> None:
    for text in (
        "max_tokens=64 input_tokens: 10",
        "Authorization header missing",
        "password is wrong",
        "the secret sauce",
    ):
        assert redact_text(text) == text
    assert redact_text("Authorization: Basic dXNlcjpwYXNz") == "Authorization: ***"
    assert redact_text('{"api_key": "abc123"}') == '{"api_key": "***"}'
    assert redact({"output_tokens": 5, "token": "abc"}) == {"output_tokens": 5, "token": "***"}


def test_an_empty_run_summarizes_as_invalid() -> None:
    s = build_summary(run_of({"a": Bucket()}))
    assert s["verdict"] == "invalid"
    assert s["exit_code"] == 3
    assert s["scenarios"]["a"]["requests"]["error_rate"] is None


def engine_scrape(t_s: float, ttft_sum: float, counts: tuple[int, int, int]) -> dict:
    """A scrape as the scraper saves it: a TTFT histogram of bounds 0.1 and 0.25 s."""
    cumulative = (counts[0], counts[0] + counts[1], sum(counts))
    histogram = Histogram(
        ttft_sum, sum(counts), tuple(zip((0.1, 0.25, math.inf), cumulative, strict=True))
    )
    return {
        "t_s": t_s,
        "source": "engine",
        "engine": "vllm",
        "series": {},
        "histograms": {"ttft_seconds": histogram.as_dict()},
    }


def test_engine_latency_is_the_histograms_growth_over_the_measured_window(tmp_path: Path) -> None:
    run = run_of(
        {"a": bucket({"ttft": [100.0, 200.0]}), "b": bucket({"ttft": [330.0]})}, warmup_s=10.0
    )
    run.server_metrics = [
        engine_scrape(5.0, 0.1, (1, 0, 0)),  # in the warm-up: not the window's start
        engine_scrape(10.2, 0.2, (2, 0, 0)),
        engine_scrape(70.0, 0.2 + 0.09 + 0.2 + 0.3, (3, 1, 1)),
    ]
    latency = build_summary(run)["engine_latency"]
    assert latency["engine"] == "vllm" and latency["window_s"] == [10.2, 70.0]
    ttft = latency["ttft_ms"]
    assert ttft["count"] == 3 and ttft["mean"] == pytest.approx(196.667, abs=1e-3)
    assert ttft["buckets"] == {"p50": [100.0, 250.0], "p90": [250.0, None], "p99": [250.0, None]}
    # the client's requests of every scenario (the engine served them all)
    assert ttft["client_count"] == 3 and ttft["client_mean"] == pytest.approx(210.0, rel=1e-3)
    assert ttft["client_minus_engine"] == pytest.approx(13.333, abs=0.3)
    assert "itl_ms" not in latency  # not exported by this engine
    write_results(tmp_path, run)  # validates the summary against its contract
    report = (tmp_path / "report.html").read_text()
    assert "Client and engine latency" in report and "250&ndash;&infin;" in report
    markdown = (tmp_path / "summary.md").read_text()
    assert "- TTFT mean: client 210.0 ms (3), engine 196.7 ms (3), client minus" in markdown
    families = {
        f.name: f.samples
        for f in text_string_to_metric_families((tmp_path / "metrics.prom").read_text())
    }
    [engine_mean] = families["slogate_engine_latency_mean_seconds"]
    assert engine_mean.labels["metric"] == "ttft" and "scenario" not in engine_mean.labels
    assert engine_mean.value == pytest.approx(0.196667, abs=1e-6)
    [drift] = families["slogate_client_minus_engine_seconds"]
    assert drift.value == pytest.approx(ttft["client_minus_engine"] / 1000)


def test_no_engine_latency_without_two_scrapes_of_its_histograms() -> None:
    run = run_of({"a": bucket({"ttft": [100.0]})}, warmup_s=10.0)
    run.server_metrics = [engine_scrape(5.0, 0.1, (1, 0, 0)), engine_scrape(20.0, 0.2, (2, 0, 0))]
    assert build_summary(run)["engine_latency"] is None
    assert build_summary(realistic_run())["engine_latency"] is None  # scrapes without histograms


def test_open_loop_throughput_shows_the_schedules_arrivals_beside_the_achieved(tmp_path) -> None:
    # a mix member with a third of a 12/s schedule (4/s); its "hot" stage at 30/s (10/s
    # for it); 180 requests completed in 60 s: 3/s achieved of 4/s scheduled
    run = run_of({"a": bucket({"e2e": [1.0] * 180})})
    run.meta["scenarios"]["a"] |= {
        "weight": 1 / 3,
        "load": {
            "rate": {"rps": 12.0, "arrival": "trace", "cv": 1.0},
            "stages": [{"name": "hot", "duration_s": 2.0, "rate": {"rps": 30.0}}],
        },
    }
    run.buckets[("a", "stage:hot")] = bucket({"e2e": [1.0] * 16})
    s = build_summary(run)["scenarios"]["a"]
    assert s["throughput"]["scheduled_per_s"] == pytest.approx(4.0)
    assert s["throughput"]["requests_per_s"] == pytest.approx(3.0)
    assert s["stages"]["hot"]["throughput"]["scheduled_per_s"] == pytest.approx(10.0)
    assert s["stages"]["hot"]["throughput"]["requests_per_s"] == pytest.approx(8.0)
    write_results(tmp_path, run)
    page = (tmp_path / "report.html").read_text()
    assert "requests/s<b>3</b>of 4/s scheduled" in page
    assert "<td>10</td><td>8</td>" in page  # the stage row: scheduled/s, then requests/s


def test_closed_loop_has_no_schedule() -> None:
    s = build_summary(run_of({"a": bucket({"e2e": [1.0] * 6})}))["scenarios"]["a"]
    assert s["throughput"]["scheduled_per_s"] is None


def counters_scrape(t_s: float, engine: str = "vllm", **series: float) -> dict:
    return {"t_s": t_s, "source": "engine", "engine": engine, "series": series}


def test_engine_metrics_are_the_counters_growth_and_gauges_over_the_measured_window(
    tmp_path: Path,
) -> None:
    run = run_of({"a": bucket({"ttft": [100.0]})}, warmup_s=10.0)
    run.server_metrics = [
        counters_scrape(5.0, generation_tokens_total=50.0, running=9.0),  # warm-up
        counters_scrape(
            10.5, generation_tokens_total=100.0, prefix_cache_hits_total=16.0, running=2.0
        ),
        {"t_s": 12.0, "source": "dcgm", "engine": "dcgm", "series": {"gpu_utilization": 0.5}},
        counters_scrape(15.5, generation_tokens_total=260.0, running=4.0, kv_cache_usage=0.25),
        counters_scrape(
            20.5,
            generation_tokens_total=420.0,
            prefix_cache_hits_total=80.0,
            running=3.0,
            kv_cache_usage=0.75,
        ),
    ]
    metrics = build_summary(run)["engine_metrics"]
    assert metrics["engine"] == "vllm" and metrics["window_s"] == [10.5, 20.5]
    assert metrics["scrapes"] == 3
    assert metrics["counters"] == {
        "generation_tokens_total": 320.0,
        "prefix_cache_hits_total": 64.0,
    }
    assert metrics["gauges"] == {
        "running": {"mean": 3.0, "max": 4.0},
        "kv_cache_usage": {"mean": 0.5, "max": 0.75},
    }
    write_results(tmp_path, run)  # validates the summary against its contract


def test_engine_metrics_leave_out_a_counter_that_went_down_and_need_two_scrapes() -> None:
    run = run_of({"a": bucket({"ttft": [100.0]})}, warmup_s=0.0)
    run.server_metrics = [
        counters_scrape(1.0, generation_tokens_total=500.0, prompt_tokens_total=10.0),
        counters_scrape(6.0, generation_tokens_total=20.0, prompt_tokens_total=30.0),  # restart
    ]
    assert build_summary(run)["engine_metrics"]["counters"] == {"prompt_tokens_total": 20.0}
    run.server_metrics = run.server_metrics[:1]
    assert build_summary(run)["engine_metrics"] is None


def test_an_slo_result_is_one_contract_entry_from_the_judge_to_the_summary() -> None:
    slos = [{"metric": "ttft_ms", "stat": "p99", "limit": 500.0, "kind": "max"}]
    run = realistic_run(slos=slos)
    result = next(r for r in judge(run).verdict.results if r.threshold.metric == "ttft_ms")
    entry = slo_entry(result)
    assert not entry.model_extra  # every key is the contract's
    assert entry.value is not None and entry.value == pytest.approx(result.value, abs=1e-6)
    assert entry.margin == pytest.approx(500.0 - entry.value, abs=1e-5)
    written = entry.model_dump(mode="json")
    summary = build_summary(run)
    assert written in summary["scenarios"]["chat"]["slo"]
    assert summary["worst_slo"] == {"scenario": "chat", **written}
