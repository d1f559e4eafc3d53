"""The diagnosis on the simulated engine, each failure made on purpose: the
right cause comes first, with the engine's metrics agreeing; a passing run
claims no cause. Each run is 15 s of load (docs/simengine.md for the settings)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from loadruns import slogate, summary

pytestmark = pytest.mark.slow

TIMELINE_CAUSES = {
    "prefill interference",
    "prefill-bound",
    "queueing",
    "concurrency ceiling",
    "decode-bound",
    "preemption",
    "saturation",
    "cache effect",
}


def run(tmp_path: Path, profile: str, load: dict, inputs: dict, outputs: int, slo: dict) -> dict:
    scenario = {
        "name": "diag",
        "api": "chat",
        "model": "auto",
        "workload": {
            "kind": "chat",
            "text": "prose",
            "input_tokens": inputs,
            "output_tokens": outputs,
            "turns": 1,
        },
        "load": {"duration": "15s", "warmup": "2s", **load},
        "request": {"ignore_eos": True},
        "slo": slo,
    }
    path = tmp_path / "diag.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "out"
    done = slogate("run", str(path), "--profile", profile, "--out", str(out))
    assert (out / "summary.json").is_file(), done.stderr[-3000:]
    return summary(out)


def first_cause(s: dict) -> dict[str, Any]:
    diag = s["scenarios"]["diag"]
    assert s["verdict"] == "fail", (s["verdict"], s["invalid_reasons"], diag["slo"])
    explaining = [f for f in s["diagnosis"] if f["explains"]]
    assert explaining, s["diagnosis"]
    return explaining[0]


def test_long_prompts_among_short_ones_are_prefill_interference(tmp_path):
    # An A100 prefills an 8k-token prompt in about 0.7 s, while a decode step
    # takes about 12 ms: the streams beside it stall for the whole prefill
    # (ITL p99 about 450 ms, far past any error of a busy load generator).
    s = run(
        tmp_path,
        "llama-3.1-8b@a100",
        {"users": 8, "spawn_rate": 8},
        {"dist": "uniform", "min": 100, "max": 8000},
        100,
        {"itl_ms": {"p99": 50}},
    )
    finding = first_cause(s)
    assert finding["cause"] == "prefill interference", s["diagnosis"]
    evidence = finding["evidence"]
    assert evidence["coinciding_share"] >= 0.5
    assert evidence["coinciding_share"] >= 3 * evidence["chance_share"]
    assert evidence["stall_ms_per_1k_input_tokens"] > 0
    assert finding["share"]["itl_ms"] >= 0.5
    assert finding["engine_metrics"] == "agree", finding["engine_text"]
    assert "--max-num-batched-tokens" in finding["action"]
    assert "slogate experiment prompt-length" in finding["action"]


def test_a_kv_pool_too_small_is_a_full_kv_cache(tmp_path):
    # 150 blocks of 16 tokens hold 2,400 tokens: twelve streams growing to 800
    # tokens each outgrow it; requests wait for blocks, running ones are
    # preempted and recompute (the client sees both, the engine says why).
    s = run(
        tmp_path,
        "llama-3.1-8b@h100:num_gpu_blocks=150",
        {"users": 12, "spawn_rate": 12},
        {"dist": "uniform", "min": 150, "max": 300},
        500,
        {"ttft_ms": {"p90": 500}, "e2e_ms": {"p90": 5000}},
    )
    finding = first_cause(s)
    assert finding["cause"] == "KV cache full", s["diagnosis"]
    assert max(finding["share"].values()) >= 0.5
    assert finding["engine_metrics"] == "agree", finding["engine_text"]
    assert "--gpu-memory-utilization" in finding["action"]
    causes = {f["cause"] for f in s["diagnosis"]}
    assert "preemption" in causes, s["diagnosis"]


def test_a_rate_past_capacity_is_queueing(tmp_path):
    # An L4 completes about 25 such requests per second; 40 arrive.
    s = run(
        tmp_path,
        "llama-3.1-8b@l4",
        {"rate": 40},
        {"dist": "uniform", "min": 100, "max": 200},
        30,
        {"ttft_ms": {"p95": 300}},
    )
    finding = first_cause(s)
    assert finding["cause"] in ("queueing", "saturation"), s["diagnosis"]
    assert finding["share"]["ttft_ms"] >= 0.5
    assert finding["engine_metrics"] == "agree", finding["engine_text"]
    assert "waiting" in finding["engine_text"]


def test_a_batch_limit_is_a_concurrency_ceiling(tmp_path):
    s = run(
        tmp_path,
        "llama-3.1-8b@h100:max_num_seqs=3",
        {"users": 12, "spawn_rate": 12},
        {"dist": "uniform", "min": 300, "max": 900},
        150,
        {"ttft_ms": {"p95": 200}},
    )
    finding = first_cause(s)
    assert finding["cause"] == "concurrency ceiling", s["diagnosis"]
    assert finding["evidence"]["ceiling"] == 3
    assert finding["share"]["ttft_ms"] >= 0.5
    assert finding["engine_metrics"] == "agree", finding["engine_text"]
    assert "--max-num-seqs" in finding["action"]


def test_a_passing_run_claims_no_cause(tmp_path):
    s = run(
        tmp_path,
        "llama-3.1-8b@h100",
        {"users": 4, "spawn_rate": 4},
        {"dist": "uniform", "min": 300, "max": 900},
        50,
        {"ttft_ms": {"p50": 2000}, "itl_ms": {"p90": 500}},
    )
    assert s["verdict"] == "pass", s["scenarios"]["diag"]["slo"]
    assert [f for f in s["diagnosis"] if f["explains"]] == []
    assert not TIMELINE_CAUSES & {f["cause"] for f in s["diagnosis"]}
