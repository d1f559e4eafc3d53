"""The CPU vLLM as an engine a tune restarts (engines/tunable_served.py): two
treatments, each a fresh vLLM that runs with its own settings (its log's
non-default arguments say so), its prefix cache reset between warm-up and
measurement (a development route: the tune's vLLM has it open), its peak
memory read from its whole process group, and a crash seen.

Marker ``vllm``: eager servers on the engine's core, one test file's servers
one after the other (tests/support/vllmservers.py); fails without the install
(`make vllm`), skipped with ``SLOGATE_SKIP_VLLM=1``.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from loadruns import slogate
from treatments import crash
from vllmservers import REAP_S, VLLM_MARKS, require_vllm

from slogate.engines.tunable_served import VllmUnderTune
from slogate.engines.vllm import MODEL_ALIAS, VllmServerConfig, group_alive

pytestmark = VLLM_MARKS
MIB = 1024**2
# About 500 tokens: whole blocks of it are cached after the first request.
PROMPT = "Explain how a bicycle works, part by part, in plain words. " * 40


@pytest.fixture(scope="module")
def engine() -> VllmUnderTune:
    require_vllm()
    return VllmUnderTune(VllmServerConfig(enforce_eager=True))


def cached_tokens(url: str) -> int:
    body = {"model": MODEL_ALIAS, "prompt": PROMPT, "max_tokens": 2, "ignore_eos": True}
    request = urllib.request.Request(
        url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        answer: dict[str, Any] = json.load(response)
    details = answer["usage"].get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)


def test_two_treatments_run_with_their_settings_and_reset_their_cache(
    engine: VllmUnderTune, tmp_path: Path
) -> None:
    first = {"max_num_seqs": "2", "max_num_batched_tokens": "256", "enable_prefix_caching": "on"}
    treatment = engine.start(first, tmp_path / "first")
    try:
        assert treatment.alive() and treatment.startup_s > 0
        log = (tmp_path / "first" / "engine.log").read_text()
        assert "'max_num_seqs': 2" in log and "'max_num_batched_tokens': 256" in log, log[-3000:]
        assert cached_tokens(treatment.url) == 0
        warm = cached_tokens(treatment.url)
        assert warm > 300, "a repeated prompt is served from the prefix cache"
        treatment.reset_caches()
        assert cached_tokens(treatment.url) == 0
        peak = treatment.peak_memory_bytes()
        # the API server, engine core and worker each import torch: hundreds of MiB
        assert peak is not None and peak > 500 * MIB, peak
        group = treatment.server.pid
    finally:
        treatment.stop()
    assert not treatment.alive() and group is not None
    deadline = time.monotonic() + REAP_S  # the engine core and worker, reaped a moment later
    while group_alive(group) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not group_alive(group), f"vLLM processes left in group {group}"

    second = {"max_num_seqs": "4", "enable_prefix_caching": "off"}
    treatment = engine.start(second, tmp_path / "second")
    try:
        log = (tmp_path / "second" / "engine.log").read_text()
        assert "'max_num_seqs': 4" in log and "'enable_prefix_caching': False" in log, log[-3000:]
        assert [cached_tokens(treatment.url) for _ in range(2)] == [0, 0]  # nothing cached
        crash(treatment, 20)
        assert not treatment.alive()
    finally:
        treatment.stop()


def test_a_bad_setting_fails_before_any_start(engine: VllmUnderTune, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        engine.start({"max_num_seqs": "64", "max_num_batched_tokens": "16"}, tmp_path)
    assert not (tmp_path / "engine.log").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_tune_of_two_batch_caps_restarts_vllm_and_recommends_the_higher_capacity(
    engine: VllmUnderTune, tmp_path: Path
) -> None:
    """``slogate tune --engine vllm`` end to end: one vLLM per level of
    max_num_seqs (eager, so a start costs no compile), each searched for the
    most users whose median TTFT holds; one sequence at a time makes every
    other user wait a whole reply, four serve them together."""
    scenario = tmp_path / "short.yaml"
    scenario.write_text(
        "name: short\napi: chat\nmodel: auto\n"
        "workload: {kind: chat, input_tokens: 32, output_tokens: 32, turns: 1, think_time_s: 0}\n"
        "load: {users: 2, duration: 3s}\nrequest: {ignore_eos: true}\n"
        "slo:\n  ttft_ms: {p50: 400}\n"
    )
    factors = tmp_path / "factors.yaml"
    factors.write_text("factors:\n  max_num_seqs: [1, 4]\n  enforce_eager: [true]\n")
    out = tmp_path / "tune"
    done = slogate(
        "tune", str(scenario), "--engine", "vllm", "--factors", str(factors),
        "--current", "max_num_seqs=1", "--current", "enforce_eager=true",
        "--no-prune", "--duration", "6s", "--warmup", "1s", "--tolerance", "0.5",
        "--max-trials", "8", "--out", str(out), timeout=840,
    )  # fmt: skip
    assert done.returncode in (0, 1), f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    doc = json.loads((out / "tune.json").read_text())
    one, four = (next(t for t in doc["treatments"] if t["settings"]["max_num_seqs"] == n)
                 for n in ("1", "4"))  # fmt: skip
    for treatment in (one, four):
        assert treatment["status"] == "measured" and treatment["startup_s"] > 0, treatment
    logs = "".join(log.read_text() for log in (out / "treatments").rglob("engine.log"))
    assert "'max_num_seqs': 1" in logs and "'max_num_seqs': 4" in logs  # one vLLM each
    # the pick is the highest confirmed capacity
    best = max(t["capacity"]["value"] or 0 for t in doc["treatments"])
    assert best > 0, doc["treatments"]
    recommended = next(t for t in doc["treatments"] if t["name"] == doc["recommended"]["treatment"])
    assert recommended["capacity"]["value"] == best  # ties go to the Pareto front
    assert (four["capacity"]["lower"] or 0) >= (one["capacity"]["lower"] or 0)
