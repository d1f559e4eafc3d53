"""Embeddings end to end against a real vLLM: its pooling runner on the same
SmolLM2-135M-shaped folder (vLLM adapts the causal LM into an embedding model).

Like ``test_vllm_e2e.py``: FAILS with the install command when the engine is
not installed, ``SLOGATE_SKIP_VLLM=1`` opts out. A module of its own, so its
server (a second vLLM) starts only after the generating one has stopped.
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
from vllmservers import VLLM_MARKS, run_on_generator_cores, vllm_server

from slogate.analysis.engine_side.server_metrics import snapshot
from slogate.engines.vllm import MODEL_ALIAS, VllmServer
from slogate.locustfiles.scraper import metrics_url_for

pytestmark = VLLM_MARKS

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    with vllm_server(tmp_path_factory, "pooling") as server:
        yield server


def prompt_tokens_total(url: str) -> float:
    with urllib.request.urlopen(metrics_url_for(url), timeout=10) as response:
        return snapshot(response.read().decode()).series["prompt_tokens_total"]


def embed(url: str, inputs: list[str]) -> Any:
    body = {"model": MODEL_ALIAS, "input": inputs, "encoding_format": "float"}
    request = urllib.request.Request(
        url + "/v1/embeddings",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)


def test_embeddings_answer_one_vector_per_input(embedder: VllmServer) -> None:
    reply = embed(embedder.url, ["the sea", "a poem about the sea", "waves"])
    vectors = [item["embedding"] for item in reply["data"]]
    assert [item["index"] for item in reply["data"]] == [0, 1, 2]
    assert {len(v) for v in vectors} == {576}  # the model's hidden size
    assert reply["usage"]["prompt_tokens"] >= 3


@pytest.mark.slow
def test_slogate_run_embeddings_against_vllm(embedder: VllmServer, tmp_path: Path) -> None:
    scenario = {
        "name": "vllm-embeddings",
        "api": "embeddings",
        "model": "auto",
        "seed": 0,
        "workload": {"kind": "embed", "text": "prose", "inputs": 4, "input_tokens": 64},
        "load": {"users": 4, "spawn_rate": 4, "duration": "20s", "warmup": "2s"},
        "slo": {"e2e_ms": {"p50": 10000}, "error_rate": {"max": 0.01}},
    }
    path = tmp_path / "vllm-embeddings.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = tmp_path / "out"
    slogate = Path(sys.executable).with_name("slogate")
    cmd = [str(slogate), "run", str(path), "--host", embedder.url, "--out", str(out)]
    before = prompt_tokens_total(embedder.url)
    done = run_on_generator_cores(embedder, cmd, RUN_TIMEOUT_S, REPO)
    after = prompt_tokens_total(embedder.url)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"

    summary = json.loads((out / "summary.json").read_text())
    assert summary["verdict"] == "pass"
    result = summary["scenarios"]["vllm-embeddings"]
    assert result["requests"]["ok"] > 0 and result["requests"]["failed"] == 0
    # every measured batch's tokens reached the engine (it also counts the warm-up's)
    assert 0 < result["tokens"]["input"] <= after - before
