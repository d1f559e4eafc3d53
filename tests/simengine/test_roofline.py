"""The roofline step model, checked against numbers computed by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from slogate.simengine.profiles import GIB, Efficiency, GPUSpec, ModelSpec, Profile, load_profile
from slogate.simengine.roofline import StepModel, StepWork

TOY_MODEL = ModelSpec(
    key="toy", hf_id="toy", layers=2, hidden=4, heads=2, kv_heads=1, head_dim=2,
    intermediate=8, vocab=10, tied_embeddings=False, max_model_len=64,
)  # fmt: skip
TOY_GPU = GPUSpec(
    key="toy", name="toy", memory_bytes=2 * GIB, hbm_bytes_per_s=1000.0,
    flops_per_s={"bf16": 1000.0}, link_bytes_per_s=100.0, allreduce_s=0.01,
)  # fmt: skip
TOY_EFF = Efficiency(
    matmul=0.5, attention=0.25, bandwidth=0.5, kv_bandwidth=0.5, link=1.0, step_overhead_s=0.001,
    per_seq_overhead_s=0.0001, request_overhead_s=0.0,
)  # fmt: skip


def toy(**settings) -> Profile:
    settings.setdefault("efficiency", TOY_EFF)
    return Profile(model=TOY_MODEL, gpu=TOY_GPU, max_num_batched_tokens=32, **settings)


def test_toy_model_sizes_by_hand() -> None:
    # per layer: q,o 2*4*2*2=32; k,v 2*4*1*2=16; MLP 3*4*8=96 -> 144; two layers 288
    assert TOY_MODEL.linear_params == 288
    assert TOY_MODEL.head_params == 40
    assert TOY_MODEL.total_params == 288 + 40 + 40
    assert TOY_MODEL.kv_bytes_per_token() == 2 * 2 * 1 * 2 * 2 == 16
    assert toy().weight_bytes == 368 * 2
    assert toy().weight_bytes_read_per_step == (288 + 40) * 2


def test_step_time_by_hand() -> None:
    # Two new tokens after 3 cached ones, one sampled.
    work = StepWork(num_seqs=1, new_tokens=2, sampled=1, context_tokens=3, attention_pairs=9)
    assert StepWork.for_chunk(3, 2) == 2 * 3 + 3 == 9  # token 4 sees 4 keys, token 5 sees 5
    cost = StepModel(toy()).cost(work)
    # linear 2*288*2 = 1152 FLOPs at 1000*0.5 -> 2.304 s; head 2*40 = 80 -> 0.16 s;
    # attention 4*2 layers*2 heads*2 dims = 32 per pair * 9 = 288 at 1000*0.25 -> 1.152 s
    assert cost.flops == 1152 + 80 + 288
    assert cost.compute_s == pytest.approx(2.304 + 0.16 + 1.152)
    # bytes: weights 656 + KV 16 * (3 + 2) = 736 at 1000*0.5 -> 1.472 s
    assert cost.bytes == 736
    assert cost.memory_s == pytest.approx(1.472)
    assert cost.overhead_s == pytest.approx(0.001 + 0.0001)
    assert cost.comm_s == 0
    assert cost.bound == "compute"
    assert cost.seconds == pytest.approx(3.616 + 0.0011)
    assert StepModel(toy()).seconds(work) == pytest.approx(cost.seconds)


def test_roofline_exponent_blends_the_linear_floors_near_the_ridge() -> None:
    # the same step as above: linear compute 2.464 s, weight reads 656 / 500 = 1.312 s
    work = StepWork(num_seqs=1, new_tokens=2, sampled=1, context_tokens=3, attention_pairs=9)
    sharp = StepModel(toy()).cost(work)
    soft = StepModel(toy(efficiency=replace(TOY_EFF, roofline_exponent=2.0))).cost(work)
    assert sharp.linear_s == pytest.approx(2.464)
    assert soft.linear_s == pytest.approx((2.464**2 + 1.312**2) ** 0.5)
    assert soft.attention_s == sharp.attention_s
    assert soft.seconds - sharp.seconds == pytest.approx(soft.linear_s - 2.464)


def test_tensor_parallel_adds_two_allreduces_per_layer() -> None:
    work = StepWork(num_seqs=1, new_tokens=2, sampled=1, context_tokens=3, attention_pairs=9)
    cost = StepModel(toy(tp=2)).cost(work)
    # 2 layers x 2 all-reduces x (0.01 s + ring 2*(2-1)/2 * 2 tokens * 4 hidden * 2 bytes / 100)
    assert cost.comm_s == pytest.approx(4 * 0.01 + 4 * 1.0 * 16 / 100)
    assert cost.compute_s == pytest.approx((2.304 + 0.16 + 1.152) / 2)


def test_allreduce_latency_grows_with_gpu_count_and_message_size() -> None:
    work = StepWork(num_seqs=1, new_tokens=2, sampled=1, context_tokens=3, attention_pairs=9)
    cost = StepModel(toy(tp=4)).cost(work)
    # fixed: 3 neighbour steps of 0.01 s; data: ring 2*3/4 of 2 tokens * 4 hidden * 2 bytes
    assert cost.comm_s == pytest.approx(4 * 3 * 0.01 + 4 * 1.5 * 16 / 100)
    slow_link = replace(TOY_EFF, link=0.5)
    halved = StepModel(toy(tp=4, efficiency=slow_link)).cost(work)
    assert halved.comm_s == pytest.approx(4 * 3 * 0.01 + 2 * 4 * 1.5 * 16 / 100)


def test_decode_is_bandwidth_bound_and_prefill_compute_bound() -> None:
    profile = load_profile("llama-3.1-8b@h100")
    model = StepModel(profile)
    decode = model.cost(StepWork(1, 1, 1, 1000, StepWork.for_chunk(1000, 1)))
    prefill = model.cost(StepWork(1, 4096, 1, 0, StepWork.for_chunk(0, 4096)))
    assert decode.bound == "memory" and prefill.bound == "compute"
    # batch-1 decode: stream 16.06 GB of weights at 70% of 3.35 TB/s, plus the overhead
    expected = (6_979_321_856 + 525_336_576) * 2 / (3.35e12 * 0.7) + 0.001 + 0.000005
    assert decode.seconds == pytest.approx(expected, rel=0.01)


def test_batching_is_nearly_free_while_bandwidth_bound() -> None:
    model = StepModel(load_profile("llama-3.1-8b@h100"))
    one, sixty_four = model.decode_step_seconds(1, 500), model.decode_step_seconds(64, 500)
    assert sixty_four < 1.5 * one  # 64x the tokens for < 1.5x the time
    assert model.decode_step_seconds(64, 8000) > 1.2 * sixty_four  # long contexts read more KV


def test_prefill_time_grows_with_prompt_length() -> None:
    model = StepModel(load_profile("llama-3.1-8b@h100"))
    times = [model.prefill_seconds(n, 8192) for n in (128, 1024, 8192, 32768)]
    assert times == sorted(times)
    assert times[3] > 4 * times[2]  # more than linear: attention over the context


def test_quantized_weights_decode_faster() -> None:
    def itl(name: str) -> float:
        return StepModel(load_profile(name)).decode_step_seconds(1, 1000)

    bf16, fp8, int4 = (
        itl("llama-3.1-8b@h100"),
        itl("llama-3.1-8b@h100:fp8"),
        itl("llama-3.1-8b@h100:int4"),
    )
    assert int4 < fp8 < 0.7 * bf16
    # int4 is weight-only: its prefill runs at the bf16 peak, fp8 (W8A8) at the fp8 peak
    prefill = {
        n: StepModel(load_profile(n)).prefill_seconds(4096, 8192)
        for n in ("llama-3.1-8b@h100", "llama-3.1-8b@h100:fp8", "llama-3.1-8b@h100:int4")
    }
    assert prefill["llama-3.1-8b@h100:fp8"] < 0.7 * prefill["llama-3.1-8b@h100"]
    assert prefill["llama-3.1-8b@h100:int4"] == pytest.approx(
        prefill["llama-3.1-8b@h100"], rel=0.02
    )


def test_efficiencies_stay_physically_plausible() -> None:
    eff = load_profile("llama-3.1-8b@h100").efficiency
    assert 0.45 <= eff.matmul <= 0.70  # docs/design.md: prefill 45-70% of peak
    assert 0.50 <= eff.bandwidth <= eff.kv_bandwidth <= 0.95  # decode 50-90% of HBM bandwidth
