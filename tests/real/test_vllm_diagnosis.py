"""The diagnosis against a real vLLM (the CPU build of the vllm tier): a rate
past what it serves is queueing, and vLLM's own waiting queue confirms it.
Its batch is capped at 4 sequences (``--max-num-seqs 4``), so past capacity
requests wait in vLLM's queue, where its ``num_requests_waiting`` shows them."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from vllmservers import VLLM_MARKS, run_on_generator_cores, vllm_server

from slogate.engines.vllm import VllmServer

pytestmark = VLLM_MARKS
REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 240
WAIT_CAUSES = ("queueing", "saturation", "concurrency ceiling")


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with vllm_server(tmp_path_factory, extra=("--max-num-seqs", "4")) as server:
        yield server


@pytest.mark.slow
def test_a_rate_past_capacity_is_queueing_confirmed_by_vllms_waiting_queue(
    vllm: VllmServer, tmp_path: Path
) -> None:
    # one busy core finished 12 such requests in 25 s at 4 users (test_vllm_e2e):
    # 6 arrive every second, about three times what it serves on a quiet core
    scenario = {
        "name": "past-capacity",
        "api": "chat",
        "model": "auto",
        "workload": {"kind": "chat", "text": "prose", "input_tokens": 64, "output_tokens": 32},
        "load": {"rate": 6, "duration": "25s", "warmup": "3s"},
        "request": {"ignore_eos": True},
        "timeouts": {"first_token": "60s", "stall": "30s"},
        "slo": {"ttft_ms": {"p50": 1000}},
    }
    path = tmp_path / "past-capacity.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "out"
    slogate = Path(sys.executable).with_name("slogate")
    cmd = [str(slogate), "run", str(path), "--host", vllm.url, "--out", str(out)]
    done = run_on_generator_cores(vllm, cmd, RUN_TIMEOUT_S, REPO)
    output = f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    summary = json.loads((out / "summary.json").read_text())
    (slo,) = summary["scenarios"]["past-capacity"]["slo"]
    assert slo["value"] is not None and slo["value"] > slo["threshold"], output
    explaining = [f for f in summary["diagnosis"] if f["explains"]]
    assert explaining and explaining[0]["cause"] in WAIT_CAUSES, summary["diagnosis"]
    queue = [f for f in explaining if f["cause"] in ("queueing", "saturation")]
    assert queue, summary["diagnosis"]
    assert queue[0]["engine_metrics"] == "agree", queue[0]["engine_text"]
    assert "engine waiting queue" in queue[0]["engine_text"]
    assert queue[0]["share"]["ttft_ms"] >= 0.2
    assert "Try on vLLM:" in queue[0]["action"]
