"""The vLLM launcher's configuration, command line and install check, without vLLM:
what `slogate engine --vllm` would run, and what it says when it cannot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slogate.engines.vllm import (
    MODEL_ALIAS,
    MODEL_CONFIG,
    TOKENIZER_FILES,
    VllmMissing,
    VllmServer,
    VllmServerConfig,
    engine_cores_default,
    generator_cores,
    write_model_folder,
)
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER

PYTHON, MODEL = Path("/env/bin/python"), Path("/cache/model")


def test_the_server_is_vllms_module_on_loopback_with_dummy_weights_and_prefix_caching() -> None:
    cmd = VllmServerConfig().command(PYTHON, MODEL, 8123)
    assert cmd[:3] == [str(PYTHON), "-m", "vllm.entrypoints.openai.api_server"]
    joined = " ".join(cmd)
    for part in (
        f"--model {MODEL}",
        f"--served-model-name {MODEL_ALIAS}",
        "--load-format dummy",
        "--host 127.0.0.1",
        "--port 8123",
        "--max-model-len 4096",
        "--runner generate",
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        "--enable-per-request-metrics",
    ):
        assert part in joined
    assert "--enforce-eager" not in cmd


def test_pooling_runner_serves_embeddings_without_generation_flags() -> None:
    cmd = VllmServerConfig(runner="pooling", enforce_eager=True).command(PYTHON, MODEL, 1)
    assert "--runner pooling" in " ".join(cmd) and "--enforce-eager" in cmd
    assert "--enable-prompt-tokens-details" not in cmd
    assert "--enable-per-request-metrics" not in cmd


def test_environment_binds_the_engine_to_its_cores_and_stays_offline(tmp_path: Path) -> None:
    core = engine_cores_default()
    env = VllmServerConfig(cores=core, kv_cache_gib=2).environment(tmp_path)
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == ",".join(map(str, core))
    assert env["OMP_NUM_THREADS"] == str(len(core))
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_NO_USAGE_STATS"] == "1"
    assert Path(env["VLLM_CACHE_ROOT"]).is_relative_to(tmp_path)
    assert Path(env["TORCHINDUCTOR_CACHE_DIR"]).is_relative_to(tmp_path)


def test_generator_cores_are_the_others() -> None:
    everyone = set(os.sched_getaffinity(0))
    engine = engine_cores_default()
    rest = set(generator_cores(engine))
    if len(everyone) > 1:
        assert rest == everyone - set(engine)
    else:
        assert rest == everyone  # one core: shared, nothing else to give


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("runner", "score", "runner must be generate or pooling"),
        ("max_model_len", 9000, "max_model_len must be 16..8192"),
        ("cores", (10_000,), "cores must be some of this process's cores"),
        ("cores", (), "cores must be some of this process's cores"),
        ("kv_cache_gib", 0, "kv_cache_gib must be >= 1"),
        ("port", 70000, "port must be 0..65535"),
    ],
)
def test_bad_configuration_is_named(field: str, value: object, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        VllmServerConfig(**{field: value})  # type: ignore[arg-type]  # a bad value, on purpose


def test_model_folder_has_smollm2s_shape_and_the_shipped_tokenizer(tmp_path: Path) -> None:
    folder = write_model_folder(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert config == MODEL_CONFIG
    assert (config["hidden_size"], config["num_hidden_layers"], config["vocab_size"]) == (
        576,
        30,
        49152,
    )
    for name in TOKENIZER_FILES:
        assert (folder / name).read_bytes() == (LOCAL_TOKENIZER.parent / name).read_bytes()
    (folder / "config.json").write_text("{}")
    write_model_folder(tmp_path)  # a changed file is rewritten
    assert json.loads((folder / "config.json").read_text()) == MODEL_CONFIG


def test_missing_install_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(VllmMissing, match=r"make vllm.*tools/install-vllm.sh"):
        VllmServer(cache=tmp_path)


def test_engine_command_without_the_install_exits_2_naming_it(tmp_path: Path) -> None:
    slogate = Path(sys.executable).with_name("slogate")
    done = subprocess.run(
        [str(slogate), "engine", "--vllm", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SLOGATE_CACHE": str(tmp_path)},
    )
    assert done.returncode == 2, done.stderr
    assert "slogate engine --vllm: vLLM engine not installed" in done.stderr
    assert "make vllm" in done.stderr


def test_engine_command_refuses_cores_it_may_not_use(tmp_path: Path) -> None:
    slogate = Path(sys.executable).with_name("slogate")
    done = subprocess.run(
        [str(slogate), "engine", "--vllm", "--cores", "1,x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "not a comma-separated list of core ids: '1,x'" in done.stderr
