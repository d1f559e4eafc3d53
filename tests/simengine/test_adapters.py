"""LoRA adapters: the simulated engine serves them beside the base model with a
load cost on first use and a cost on every step that runs them; a mix sends to
several adapter names and the summary and report break every metric down per
model name."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from loadruns import slogate, summary

from slogate.analysis.measurement.records import ErrorKind
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts
from slogate.simengine.adapters import AdapterCost
from slogate.simengine.engine import TokenStream
from slogate.simengine.profiles import load_profile
from slogate.simengine.scheduler import Sequence

PROFILE = "llama-3.1-8b@h100:lora_adapters=2"
TURN = PlannedTurn("a", 0, 0, "hello there", 4, 4, 4)


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    running = start_engine(PROFILE)
    try:
        yield running
    finally:
        running.stop()


def ttft_ns(url: str, model: str):
    client = StreamClient(url, "chat", model, RequestOptions(ignore_eos=True), Timeouts(), 1)
    try:
        rec = client.send(TURN).record
    finally:
        client.close()
    return rec, request_metrics(rec).ttft_ns


def test_adapters_are_listed_with_their_parent(engine: EngineProcess) -> None:
    with urllib.request.urlopen(engine.url + "/v1/models") as response:
        cards = json.load(response)["data"]
    assert [c["id"] for c in cards] == ["meta-llama/Llama-3.1-8B-Instruct", "lora-0", "lora-1"]
    assert {c["parent"] for c in cards[1:]} == {"meta-llama/Llama-3.1-8B-Instruct"}


def test_first_use_of_an_adapter_waits_for_its_load(engine: EngineProcess) -> None:
    load_s = load_profile(PROFILE).adapter_load_s
    first, first_ttft = ttft_ns(engine.url, "lora-1")
    assert first.ok, first.error_message
    assert first_ttft >= load_s * 1e9  # queued only once loaded
    again, _ = ttft_ns(engine.url, "lora-1")
    assert again.ok
    unknown, _ = ttft_ns(engine.url, "lora-9")
    assert unknown.error is ErrorKind.HTTP_4XX and "does not exist" in unknown.error_message


def test_adapter_size_follows_rank_and_architecture() -> None:
    small = load_profile("llama-3.1-8b@h100:lora_adapters=1:lora_rank=8")
    large = load_profile("llama-3.1-8b@h100:lora_adapters=1:lora_rank=64")
    assert large.adapter_bytes == 8 * small.adapter_bytes
    # rank 16 on every projection and the MLP of Llama-3.1-8B: 80 MiB in bf16
    assert load_profile(PROFILE).adapter_bytes == 80 * 2**20


def test_adapter_steps_pay_kernels_and_a_weight_read_per_adapter() -> None:
    profile = load_profile(PROFILE)
    cost = AdapterCost(profile)
    # Punica's 2 ms per token on a 32-layer model; Llama-3.1-8B has 32 layers
    assert cost.kernels_s == pytest.approx(2e-3)
    bandwidth = profile.gpu.hbm_bytes_per_s * profile.efficiency.bandwidth
    assert cost.per_adapter_s == pytest.approx(80 * 2**20 / bandwidth)

    def batch(*adapters: str | None) -> list[Sequence]:
        seqs = [Sequence(f"r{i}", 8, 8) for i in range(len(adapters))]
        for seq, adapter in zip(seqs, adapters, strict=True):
            TokenStream(seq).adapter = adapter
        return seqs

    assert cost.seconds(batch(None, None)) == 0.0  # the base model alone
    one = cost.seconds(batch(None, "lora-0", "lora-0"))
    two = cost.seconds(batch("lora-0", "lora-1"))
    assert one == pytest.approx(cost.kernels_s + cost.per_adapter_s)
    assert two - one == pytest.approx(cost.per_adapter_s)


def tpot_ms(url: str, model: str, turn: PlannedTurn) -> float:
    client = StreamClient(url, "chat", model, RequestOptions(ignore_eos=True), Timeouts(), 1)
    try:
        client.send(turn)  # loads the adapter, warms the connection
        records = [client.send(turn).record for _ in range(3)]
    finally:
        client.close()
    assert all(r.ok for r in records), [r.error_message for r in records]
    return sum(request_metrics(r).tpot_ns for r in records) / len(records) / 1e6


@pytest.mark.slow
def test_adapter_requests_decode_slower_by_the_adapter_cost(engine: EngineProcess) -> None:
    """Alone on the engine (speedup 1), a request for an adapter pays the LoRA
    kernels and its weight read on every decode step; the base model does not."""
    turn = PlannedTurn("a", 0, 0, "hello there", 64, 4, 64)
    base = tpot_ms(engine.url, "meta-llama/Llama-3.1-8B-Instruct", turn)
    adapted = tpot_ms(engine.url, "lora-0", turn)
    cost = AdapterCost(load_profile(PROFILE))
    expected = (cost.kernels_s + cost.per_adapter_s) * 1e3
    assert adapted - base == pytest.approx(expected, rel=0.25), (base, adapted)


@pytest.mark.slow
def test_mix_over_adapters_is_broken_down_per_model(tmp_path: Path) -> None:
    mix = tmp_path / "mix.yaml"
    mix.write_text(
        "name: lora-mix\n"
        "load: {users: 6, duration: 15s, warmup: 2s}\n"
        "scenarios:\n"
        "  - {file: chat, name: base}\n"
        "  - {file: chat, name: support, model: lora-0}\n"
        "  - {file: chat, name: legal, model: lora-1}\n"
    )
    out = tmp_path / "out"
    done = slogate("run", str(mix), "--profile", PROFILE, "--out", str(out))
    s = summary(out)
    assert done.returncode in (0, 1, 4), done.stderr[-3000:]
    models = s["models"]
    assert set(models) == {"meta-llama/Llama-3.1-8B-Instruct", "lora-0", "lora-1"}
    assert models["lora-0"]["scenarios"] == ["support"]
    for name, block in models.items():
        assert block["requests"]["ok"] > 0 and block["requests"]["failed"] == 0, name
        assert block["metrics"]["ttft_ms"]["count"] == block["requests"]["ok"]
    total = sum(b["requests"]["ok"] for b in models.values())
    assert total == sum(sc["requests"]["ok"] for sc in s["scenarios"].values())
    assert 'id="models"' in (out / "report.html").read_text()
