"""Profiles: architecture-derived sizes, the textbook KV example, the name grammar."""

from __future__ import annotations

import pytest

from slogate.simengine.profiles import (
    GIB,
    MIB,
    ProfileError,
    gpus,
    load_profile,
    models,
    parse_profile,
)


def test_builtin_catalogue_has_the_documented_models_and_gpus() -> None:
    assert set(models()) == {
        "llama-3.1-8b",
        "llama-3.1-70b",
        "qwen2.5-7b",
        "llama-2-7b",
        "smollm2-135m",
        "qwen3-8b",
        "qwen3-embedding-0.6b",
        "qwen2.5-vl-7b",
    }
    assert models()["qwen2.5-vl-7b"].vision == (6.7e8, 14, 2)
    assert models()["qwen3-embedding-0.6b"].embedding_dimensions == 1024
    assert models()["qwen3-8b"].reasoning == (600.0, 1800.0)
    assert models()["llama-3.1-8b"].reasoning is None
    assert set(gpus()) == {"h100", "h200", "a100", "l40s", "l4"}


@pytest.mark.parametrize(
    ("model", "published"),
    [  # safetensors parameter counts on the Hugging Face model pages
        ("llama-3.1-8b", 8_030_261_248),
        ("llama-3.1-70b", 70_553_706_496),
        ("qwen2.5-7b", 7_615_616_512),
        ("llama-2-7b", 6_738_415_616),
        ("smollm2-135m", 134_515_008),
    ],
)
def test_parameter_counts_match_the_published_sizes(model: str, published: int) -> None:
    # Only norms and Qwen's q/k/v biases are left out: well under 0.1%.
    assert models()[model].total_params == pytest.approx(published, rel=1e-3)
    assert models()[model].total_params <= published


@pytest.mark.parametrize(
    ("model", "kib"),
    [("llama-3.1-8b", 128), ("llama-3.1-70b", 320), ("qwen2.5-7b", 56), ("llama-2-7b", 512)],
)
def test_kv_bytes_per_token_match_notes(model: str, kib: int) -> None:
    assert models()[model].kv_bytes_per_token() == kib * 1024
    assert models()[model].kv_bytes_per_token("fp8") == kib * 512


def test_worked_kv_cache_example_llama2_7b_batch4_4096_fp16() -> None:
    profile = load_profile("llama-2-7b@a100:fp16")
    expected = 2 * 4 * 32 * 4096 * 4096 * 2  # K and V x batch x layers x tokens x hidden x bytes
    assert profile.kv_cache_bytes(4 * 4096) == expected == 8_589_934_592
    assert round(expected / 1e9, 1) == 8.6


def test_weight_bytes_per_dtype_keep_embeddings_16_bit() -> None:
    bf16 = load_profile("llama-3.1-8b@h100")
    fp8 = load_profile("llama-3.1-8b@h100:fp8")
    int4 = load_profile("llama-3.1-8b@h100:int4")
    linear, rest = 6_979_321_856, 2 * 525_336_576
    assert bf16.weight_bytes == 2 * (linear + rest)
    assert fp8.weight_bytes == linear + 2 * rest
    assert int4.weight_bytes == int(linear * (0.5 + 2 / 128) + 2 * rest)
    assert fp8.compute_type == "fp8" and int4.compute_type == "bf16"
    assert load_profile("llama-3.1-8b@a100:fp8").compute_type == "bf16"  # no fp8 units on Ampere


def test_kv_capacity_is_memory_times_utilization_minus_weights_and_runtime() -> None:
    profile = load_profile("llama-3.1-8b@h100")
    runtime = GIB + 8192 * (4 * 4096 + 2 * 14336) * 2
    budget = int(81559 * MIB * 0.9 - profile.weight_bytes - runtime)
    assert profile.kv_blocks == budget // (131072 * 16)
    assert profile.kv_capacity_tokens == profile.kv_blocks * 16
    # about 450k tokens, in line with what vLLM reports for this model on an H100
    assert 430_000 < profile.kv_capacity_tokens < 470_000
    lower = load_profile("llama-3.1-8b@h100:gpu_memory_utilization=0.5")
    assert lower.kv_capacity_tokens < profile.kv_capacity_tokens / 2


def test_tensor_parallel_splits_weights_and_kv_heads() -> None:
    profile = load_profile("llama-3.1-70b@2xh100:fp8")
    assert profile.tp == 2
    assert profile.weight_bytes_per_gpu == -(-profile.weight_bytes // 2)
    assert profile.kv_bytes_per_token_per_gpu == profile.kv_bytes_per_token // 2
    # 8 KV heads over 16 GPUs: each GPU still holds one head (replicated)
    wide = load_profile("llama-3.1-70b@16xh100")
    assert wide.kv_bytes_per_token_per_gpu == wide.kv_bytes_per_token // 8


def test_profile_name_grammar_round_trips() -> None:
    profile = parse_profile(
        "Llama-3.3-70B@2xH100:fp8:kv=fp8:max_num_seqs=64:enable_prefix_caching=false"
    )
    assert profile.model.key == "llama-3.1-70b"
    assert (profile.tp, profile.weight_dtype, profile.kv_dtype) == (2, "fp8", "fp8")
    assert profile.scheduler_max_num_seqs == 64 and not profile.enable_prefix_caching
    assert profile.name == "llama-3.1-70b@2xh100:fp8:kv=fp8"
    assert parse_profile(profile.name).name == profile.name
    assert parse_profile("llama-2-7b@a100").weight_dtype == "fp16"  # the checkpoint's dtype


def test_vllm_scheduler_defaults_depend_on_gpu_memory() -> None:
    big, small = load_profile("llama-3.1-8b@h100"), load_profile("llama-3.1-8b@l4")
    assert (big.scheduler_max_num_seqs, big.scheduler_max_num_batched_tokens) == (1024, 8192)
    assert (small.scheduler_max_num_seqs, small.scheduler_max_num_batched_tokens) == (256, 2048)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("gpt-5@h100", "unknown model"),
        ("llama-3.1-8b@b200", "unknown GPU"),
        ("llama-3.1-8b", "expected MODEL@"),
        ("llama-3.1-8b@h100:fp4", "neither a weight dtype"),
        ("llama-3.1-8b@h100:kv=int2", "kv dtype"),
        ("llama-3.1-8b@h100:colour=red", "unknown setting"),
        ("llama-3.1-70b@h100", "use more GPUs"),  # 141 GB of bf16 weights on one 80 GB card
    ],
)
def test_bad_profiles_are_rejected_with_a_reason(name: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        load_profile(name)


def test_custom_profile_file(tmp_path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(
        "model:\n  key: tiny\n  layers: 2\n  hidden: 64\n  heads: 4\n  kv_heads: 2\n"
        "  intermediate: 128\n  vocab: 1000\n  max_model_len: 2048\n"
        "gpu: l4\nweight_dtype: int8\nmax_num_seqs: 8\nefficiency:\n  bandwidth: 0.5\n"
    )
    profile = load_profile(str(path))
    assert profile.model.key == "tiny" and profile.model.head_dim == 16
    assert profile.gpu.key == "l4" and profile.weight_dtype == "int8"
    assert profile.scheduler_max_num_seqs == 8
    assert profile.efficiency.bandwidth == 0.5
    assert profile.efficiency.matmul == load_profile("llama-3.1-8b@l4").efficiency.matmul
    with pytest.raises(ProfileError, match="at least 'model' and 'gpu'"):
        (tmp_path / "bad.yaml").write_text("model: llama-3.1-8b\n")
        load_profile(str(tmp_path / "bad.yaml"))


def test_gpu_efficiency_overrides_the_defaults_and_a_file_overrides_the_gpu(tmp_path) -> None:
    defaults = load_profile("llama-3.1-8b@h100").efficiency
    a100 = load_profile("llama-3.1-8b@a100").efficiency
    assert a100.matmul == load_profile("llama-3.1-8b@a100").gpu.efficiency["matmul"]
    assert a100.matmul != defaults.matmul
    assert a100.bandwidth == defaults.bandwidth  # the rest stays calibrated globally
    path = tmp_path / "a100.yaml"
    path.write_text("model: llama-3.1-8b\ngpu: a100\nefficiency: {matmul: 0.5}\n")
    assert load_profile(str(path)).efficiency.matmul == 0.5
    path.write_text(
        "model: llama-3.1-8b\ngpu:\n  key: odd\n  memory_mib: 81920\n  hbm_gbps: 2000\n"
        "  tflops: {bf16: 300}\n  efficiency: {bandwidth: 1.5}\n"
    )
    with pytest.raises(ProfileError, match=r"GPU 'odd': efficiency.bandwidth must be in \(0, 1\]"):
        load_profile(str(path))
