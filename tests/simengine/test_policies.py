"""Engine families: vLLM admits and preempts, TensorRT-LLM reserves the whole
sequence at admission (GUARANTEED_NO_EVICT), SGLang chunks by GPU size and
overlaps its CPU scheduling with the GPU; the front-end cost reaches TTFT."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slogate.simengine.profiles import GIB, ProfileError, load_profile
from slogate.simengine.scheduler import Scheduler, Sequence
from slogate.simengine.simulate import simulate_closed_loop

SMALL_KV = {"num_gpu_blocks": 1000}  # 16,000 tokens: a tight cache makes policies differ


def test_vllm_preempts_where_trtllm_reserves_and_never_evicts() -> None:
    def run(engine: str):
        profile = load_profile("llama-3.1-8b@h100:fp8", engine=engine, **SMALL_KV)
        return simulate_closed_loop(
            profile, concurrency=32, input_tokens=1000, output_tokens=1000, requests=64
        )

    vllm, trtllm = run("vllm"), run("trtllm")
    assert vllm.preemptions > 0
    assert trtllm.preemptions == 0
    # each sequence holds ceil(1999 / 16) = 125 blocks from admission: 8 fit in 1000
    assert trtllm.max_running == 8
    assert vllm.max_running > trtllm.max_running


def test_trtllm_admission_reserves_prompt_plus_output_blocks() -> None:
    scheduler = Scheduler(load_profile("llama-3.1-8b@h100", engine="trtllm", **SMALL_KV))
    a, b = Sequence("a", 100, 8000), Sequence("b", 100, 8000)
    scheduler.add(a)
    scheduler.add(b)
    step = scheduler.schedule()
    assert step.seqs == [a]  # b's 507 blocks do not fit next to a's 507
    assert a.num_blocks == (100 + 8000 - 1 + 15) // 16 == 507
    assert scheduler.kv.num_free == 493


def test_vllm_admission_takes_only_the_first_chunk() -> None:
    scheduler = Scheduler(load_profile("llama-3.1-8b@h100", **SMALL_KV))
    a = Sequence("a", 100, 8000)
    scheduler.add(a)
    scheduler.schedule()
    assert a.num_blocks == 7  # ceil(100 / 16)


def test_engine_family_sets_defaults_and_kv_sizing() -> None:
    vllm = load_profile("llama-3.1-8b@h100:fp8")
    trt = load_profile("llama-3.1-8b@h100:fp8:engine=trtllm")
    assert trt.name == "llama-3.1-8b@h100:fp8:engine=trtllm"
    assert load_profile(trt.name) == trt
    assert (vllm.scheduler_max_num_seqs, trt.scheduler_max_num_seqs) == (1024, 2048)
    left = trt.gpu.memory_bytes - trt.weight_bytes_per_gpu - trt.runtime_reserve_bytes_per_gpu
    assert trt.kv_budget_bytes_per_gpu == int(0.9 * left)
    half = load_profile(trt.name, kv_cache_free_gpu_mem_fraction=0.5)
    assert half.kv_budget_bytes_per_gpu == int(0.5 * left)
    assert vllm.kv_budget_bytes_per_gpu == int(
        vllm.gpu.memory_bytes * 0.9 - vllm.weight_bytes_per_gpu - vllm.runtime_reserve_bytes_per_gpu
    )
    assert trt.describe()["engine"] == "trtllm"
    assert trt.kv_budget_bytes_per_gpu > 50 * GIB


def test_unknown_engine_is_refused_by_name() -> None:
    with pytest.raises(ProfileError, match=r"engine 'tgi': expected one of vllm, trtllm, sglang"):
        load_profile("llama-3.1-8b@h100:engine=tgi")
    with pytest.raises(ProfileError, match="kv_cache_free_gpu_mem_fraction"):
        load_profile("llama-3.1-8b@h100:engine=trtllm:kv_cache_free_gpu_mem_fraction=1.5")


def test_front_end_cost_adds_to_ttft_once_per_request() -> None:
    base = load_profile("llama-3.1-8b@h100")
    free = replace(base, efficiency=replace(base.efficiency, request_overhead_s=0.0))
    costly = replace(base, efficiency=replace(base.efficiency, request_overhead_s=0.010))

    def run(profile):
        return simulate_closed_loop(
            profile, concurrency=1, input_tokens=500, output_tokens=20, requests=4
        )

    a, b = run(free), run(costly)
    assert b.ttft_mean_s - a.ttft_mean_s == pytest.approx(0.010, abs=1e-9)
    assert b.tpot_mean_s == pytest.approx(a.tpot_mean_s)


def test_trtllm_computes_a_prompt_in_one_step_where_vllm_chunks() -> None:
    def first_step(engine: str) -> list[tuple[str, int]]:
        scheduler = Scheduler(load_profile("llama-3.1-8b@h100", engine=engine))
        for name in ("a", "b"):
            scheduler.add(Sequence(name, 5000, 10))
        step = scheduler.schedule()
        return [(s.request_id, n) for s, n in zip(step.seqs, step.counts, strict=True)]

    assert first_step("vllm") == [("a", 5000), ("b", 3192)]  # budget 8192, b chunked
    assert first_step("trtllm") == [("a", 5000)]  # b waits for a step with room


def test_trtllm_runs_a_prompt_longer_than_the_budget_on_its_own() -> None:
    scheduler = Scheduler(load_profile("llama-3.1-8b@h100", engine="trtllm"))
    long, short = Sequence("long", 20_000, 2), Sequence("short", 100, 2)
    scheduler.add(long)
    scheduler.add(short)
    step = scheduler.schedule()
    assert [(s.request_id, n) for s, n in zip(step.seqs, step.counts, strict=True)] == [
        ("long", 20_000)
    ]
    scheduler.complete(step, 1.0)
    assert long.output_len == 1 and long.first_token_time == 1.0


def test_sglang_chunk_size_follows_its_gpu_memory_rule() -> None:
    # 8192-token chunks from 35 GiB up (an L40S qualifies, unlike vLLM's 70 GiB rule)
    sizes = {
        gpu: load_profile(f"llama-3.1-8b@{gpu}:fp8:engine=sglang").scheduler_max_num_batched_tokens
        for gpu in ("h100", "l40s", "l4")
    }
    assert sizes == {"h100": 8192, "l40s": 8192, "l4": 2048}
    assert load_profile("llama-3.1-8b@l40s:fp8").scheduler_max_num_batched_tokens == 2048


def test_sglang_overlap_takes_the_step_overhead_off_each_decode_step() -> None:
    def run(engine: str):
        profile = load_profile(f"llama-3.1-8b@h100:fp8:engine={engine}")
        return simulate_closed_loop(
            profile, concurrency=8, input_tokens=200, output_tokens=50, requests=24
        )

    vllm, sglang = run("vllm"), run("sglang")
    step_overhead = load_profile("llama-3.1-8b@h100").efficiency.step_overhead_s
    assert vllm.tpot_mean_s - sglang.tpot_mean_s == pytest.approx(step_overhead, rel=0.05)
    assert sglang.ttft_mean_s < vllm.ttft_mean_s


def test_sglang_retracts_like_vllm_when_the_cache_runs_out() -> None:
    profile = load_profile("llama-3.1-8b@h100:fp8", engine="sglang", **SMALL_KV)
    result = simulate_closed_loop(
        profile, concurrency=32, input_tokens=1000, output_tokens=1000, requests=64
    )
    assert result.preemptions > 0
