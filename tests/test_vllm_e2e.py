"""End to end against a real vLLM: its CPU build serving SmolLM2-135M's shape
with dummy weights (random tokens at that model's cost).

``make vllm`` installs the engine (``tools/install-vllm.sh``); when it is not
installed these tests FAIL with the command to run. Developers without it can
opt out with ``SLOGATE_SKIP_VLLM=1`` (or ``-m "not vllm"``). The engine runs on
one core and each ``slogate run`` on the others.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from enginewire import get_json, stream_chat
from vllmservers import VLLM_MARKS, run_on_generator_cores, vllm_server

from slogate.analysis.server_metrics import snapshot
from slogate.engines.vllm import MODEL_ALIAS, VllmServer
from slogate.locustfiles.scraper import metrics_url_for

pytestmark = VLLM_MARKS

REPO = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 240
# Every series vLLM 0.32 exports that slogate maps (read from its /metrics).
MAPPED = (
    "running",
    "waiting",
    "kv_cache_usage",
    "prompt_tokens_total",
    "generation_tokens_total",
    "preemptions_total",
    "prefix_cache_hits_total",
    "prefix_cache_queries_total",
)


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with vllm_server(tmp_path_factory) as server:
        yield server


def metrics_text(url: str) -> str:
    with urllib.request.urlopen(metrics_url_for(url), timeout=10) as response:
        return response.read().decode()


def test_models_endpoint_names_the_engine_and_its_context(vllm: VllmServer) -> None:
    (model,) = get_json(vllm.url + "/v1/models")["data"]
    assert model["owned_by"] == "vllm"
    assert model["id"] == MODEL_ALIAS
    assert model["max_model_len"] == vllm.config.max_model_len


def test_metrics_map_under_vllms_own_names(vllm: VllmServer) -> None:
    before = snapshot(metrics_text(vllm.url))
    events = stream_chat(vllm.url, MODEL_ALIAS, "Write a short poem about the sea.", 16)
    after = snapshot(metrics_text(vllm.url))

    assert events[-1] == "[DONE]"
    usage = events[-2]["usage"]
    assert usage["completion_tokens"] == 16
    assert after.engine == "vllm"
    assert set(MAPPED) <= set(after.series), sorted(after.series)
    generated = after.series["generation_tokens_total"] - before.series["generation_tokens_total"]
    assert generated == 16
    prompted = after.series["prompt_tokens_total"] - before.series["prompt_tokens_total"]
    assert prompted == usage["prompt_tokens"]
    assert after.series["prefix_cache_queries_total"] > before.series["prefix_cache_queries_total"]
    assert 0 <= after.series["kv_cache_usage"] <= 1
    ttft, itl = after.histograms["ttft_seconds"], after.histograms["itl_seconds"]
    assert ttft.count - before.histograms["ttft_seconds"].count == 1
    # 16 tokens, 15 gaps between them
    assert itl.count - before.histograms["itl_seconds"].count == 15


def scenario_file(api: str, folder: Path) -> Path:
    """A load a CPU engine on one core serves in 25 s: short prompts and outputs,
    4 users, SLOs a CPU meets. Medians: a busy shared core finished 12 requests
    of 32 tokens in 25 s (compiled), too few to bound a p90 (36 needed), and
    eager, with another vLLM starting on its core, 4 (a p50 needs 6): outputs
    of 16 tokens."""
    data = {
        "name": f"vllm-{api}",
        "api": api,
        "model": "auto",
        "seed": 0,
        "workload": {
            "kind": "chat",
            "text": "prose",
            "input_tokens": 32,
            "output_tokens": 16,
            "turns": 1,
            "think_time_s": 0,
        },
        "load": {"users": 4, "spawn_rate": 4, "duration": "25s", "warmup": "3s"},
        "request": {"ignore_eos": True},
        "timeouts": {"first_token": "60s", "stall": "30s"},
        "slo": {
            "ttft_ms": {"p50": 5000},
            "itl_ms": {"p50": 1000},
            "error_rate": {"max": 0.01},
        },
    }
    path = folder / f"vllm-{api}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def slogate_run(vllm: VllmServer, scenario: Path, out: Path) -> dict[str, Any]:
    slogate = Path(sys.executable).with_name("slogate")
    cmd = [str(slogate), "run", str(scenario), "--host", vllm.url, "--out", str(out)]
    done = run_on_generator_cores(vllm, cmd, RUN_TIMEOUT_S, REPO)
    output = f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.returncode == 0, output
    return json.loads((out / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("api", ["chat", "completions", "responses"])
def test_slogate_run_against_vllm(vllm: VllmServer, api: str, tmp_path: Path) -> None:
    before = snapshot(metrics_text(vllm.url)).series
    summary = slogate_run(vllm, scenario_file(api, tmp_path), tmp_path / "out")
    after = snapshot(metrics_text(vllm.url)).series

    assert summary["verdict"] == "pass"
    result = summary["scenarios"][f"vllm-{api}"]
    assert result["requests"]["ok"] > 0
    assert result["requests"]["failed"] == 0
    tokens = result["tokens"]
    assert tokens["count_method"] == "usage"
    engine_generated = after["generation_tokens_total"] - before["generation_tokens_total"]
    # The engine also counts the warm-up's tokens and those of streams cut at the end.
    assert 0 < tokens["output"] <= engine_generated

    # the engine's own TTFT and ITL, from its histograms, beside the client's
    latency = summary["engine_latency"]
    assert latency["engine"] == "vllm"
    for key in ("ttft_ms", "itl_ms"):
        stat = latency[key]
        assert stat["count"] > 0 and stat["client_count"] > 0, stat
        assert stat["mean"] > 0 and stat["client_mean"] > 0, stat
        assert stat["client_minus_engine"] == pytest.approx(
            stat["client_mean"] - stat["mean"], abs=0.002
        )
