"""llama.cpp and vLLM as engines a tune restarts (engines/tunable_served.py),
without the engines: their settings checked before any start, the command a
user pastes parsing back into the configuration the tune ran, and the served
treatment's start failure, crash and peak memory seen on real processes."""

from __future__ import annotations

import dataclasses
import shlex
import sys
import urllib.request
from pathlib import Path

import pytest
from treatments import crash

from slogate.engines import llamacpp, vllm
from slogate.engines.child import group_peak_rss_bytes
from slogate.engines.served import ServedEngine
from slogate.engines.tunable import EngineStartFailed
from slogate.engines.tunable_served import (
    LlamaCppUnderTune,
    ServedTreatment,
    VllmUnderTune,
    start_served,
)

MIB = 1024**2


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"parallel": "0"}, "parallel"),
        ({"parallel": "two"}, "parallel"),
        ({"ctx_size": "10000", "parallel": "3"}, "ctx_size"),
        ({"ctx_size": "128", "parallel": "4"}, "ctx_per_slot"),
        ({"batch_size": "256", "ubatch_size": "512"}, "ubatch_size"),
        ({"ubatch_size": "4096"}, "ubatch_size"),
        ({"flash_attn": "maybe"}, "flash_attn"),
        ({"threads": "2"}, "threads"),
    ],
)
def test_llamacpp_bad_settings_are_named(settings: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        LlamaCppUnderTune().check(settings)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"max_num_seqs": "0"}, "max_num_seqs"),
        ({"max_num_batched_tokens": "x"}, "max_num_batched_tokens"),
        ({"max_num_seqs": "64", "max_num_batched_tokens": "32"}, "max_num_batched_tokens"),
        (
            {"enable_chunked_prefill": "false", "max_num_batched_tokens": "512"},
            "max_num_batched_tokens",
        ),
        ({"enable_prefix_caching": "sometimes"}, "enable_prefix_caching"),
        ({"tensor_parallel_size": "2"}, "tensor_parallel_size"),
    ],
)
def test_vllm_bad_settings_are_named(settings: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        VllmUnderTune().check(settings)


def test_llamacpp_settings_reach_the_server_command() -> None:
    engine = LlamaCppUnderTune()
    settings = {"parallel": "2", "ctx_size": "4096", "batch_size": "256", "ubatch_size": "128",
                "flash_attn": "off"}  # fmt: skip
    command = engine.config(settings).command(Path("llama-server"), Path("m.gguf"), 8080)
    flags = ("--parallel", "--ctx-size", "--batch-size", "--ubatch-size", "--flash-attn")
    values = [command[command.index(flag) + 1] for flag in flags]
    assert values == ["2", "4096", "256", "128", "off"]


def test_llamacpp_launch_command_parses_back_to_the_same_configuration() -> None:
    engine = LlamaCppUnderTune()
    for settings in ({}, {"parallel": "8", "ctx_size": "16384", "ubatch_size": "64",
                          "flash_attn": "on"}):  # fmt: skip
        words = shlex.split(engine.launch_command(settings))
        assert words[:3] == ["slogate", "engine", "--llama-cpp"]
        args = llamacpp.build_parser().parse_args(words[3:])
        config = engine.config(settings)
        assert (args.slots, args.ctx_per_slot, args.batch_size, args.ubatch_size,
                args.flash_attn, args.cache_ram) == (
            config.slots, config.ctx_per_slot, config.batch_size, config.ubatch_size,
            config.flash_attn, config.cache_ram_mib)  # fmt: skip
        assert config.cache_ram_mib == 0  # the prompt cache no route empties is off


def test_vllm_launch_command_parses_back_to_the_same_configuration() -> None:
    engine = VllmUnderTune(vllm.VllmServerConfig(enforce_eager=True))
    settings = {"max_num_seqs": "8", "max_num_batched_tokens": "512",
                "enable_prefix_caching": "off", "enable_chunked_prefill": "true"}  # fmt: skip
    words = shlex.split(engine.launch_command(settings))
    assert words[:3] == ["slogate", "engine", "--vllm"]
    parsed = vllm.config_from(vllm.build_parser().parse_args(words[3:]))
    wanted = engine.config(settings)
    # the user's server listens on slogate engine's port and needs no development routes
    assert parsed == dataclasses.replace(wanted, dev_mode=False, port=8000)
    command = wanted.command(Path("python"), Path("model"), 8000)
    assert "--no-enable-prefix-caching" in command and "--enable-chunked-prefill" in command
    assert command[command.index("--max-num-seqs") + 1] == "8"
    assert wanted.environment(Path("env"))["VLLM_SERVER_DEV_MODE"] == "1"


def test_defaults_are_valid_settings_and_name_every_factor() -> None:
    for engine, factors in ((LlamaCppUnderTune(), 5), (VllmUnderTune(), 5)):
        defaults = engine.defaults()
        assert len(defaults) == factors
        engine.check(defaults)
    assert LlamaCppUnderTune().defaults()["ctx_size"] == str(
        llamacpp.DEFAULT_SLOTS * llamacpp.DEFAULT_CTX_PER_SLOT
    )


# -- a served treatment on real processes ------------------------------------------
ALLOCATE = "import sys, time; block = bytearray({mib} * 1024 * 1024); {rest}"


class PythonServer(ServedEngine):
    """A stand-in server: Python's http.server (serves once / answers), or a
    script that never serves."""

    label = "test-server"
    start_error = RuntimeError
    stop_grace_s = 2.0

    def __init__(self, log: Path, script: str | None = None, timeout_s: float = 20.0) -> None:
        super().__init__("127.0.0.1", 0, timeout_s, log)
        self.script = script

    def command(self, port: int) -> list[str]:
        if self.script is not None:
            return [sys.executable, "-c", self.script]
        serve = (
            "import http.server as h; "
            f"h.test(h.SimpleHTTPRequestHandler, port={port}, bind='127.0.0.1')"
        )
        return [sys.executable, "-c", ALLOCATE.format(mib=64, rest=serve)]

    def serves(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False


def no_reset(url: str) -> None:
    raise AssertionError("not called")


def test_a_served_treatment_times_its_start_reads_its_peak_memory_and_sees_a_crash(
    tmp_path: Path,
) -> None:
    treatment = start_served(PythonServer(tmp_path / "log"), no_reset, (RuntimeError,))
    try:
        assert isinstance(treatment, ServedTreatment)
        assert 0 < treatment.startup_s < 20
        assert treatment.alive()
        peak = treatment.peak_memory_bytes()
        assert peak is not None and peak >= 64 * MIB
        crash(treatment, 5)
        assert not treatment.alive()
    finally:
        treatment.stop()
    assert treatment.peak_memory_bytes() == peak  # kept after the processes are gone


def test_a_server_that_exits_while_starting_fails_with_its_log_tail(tmp_path: Path) -> None:
    script = "import sys; print('model file is corrupt', file=sys.stderr); sys.exit(3)"
    with pytest.raises(EngineStartFailed) as caught:
        start_served(PythonServer(tmp_path / "log", script), no_reset, (RuntimeError,))
    assert "code 3" in str(caught.value)
    assert "model file is corrupt" in caught.value.log_tail


def test_a_server_that_misses_its_deadline_fails_with_its_log_tail(tmp_path: Path) -> None:
    script = "import time; print('loading', flush=True); time.sleep(60)"
    server = PythonServer(tmp_path / "log", script, timeout_s=1.0)
    with pytest.raises(EngineStartFailed) as caught:
        start_served(server, no_reset, (RuntimeError,))
    assert "after 1 s" in str(caught.value)
    assert caught.value.log_tail == "loading"
    assert not server.running()


def test_peak_rss_sums_every_process_of_the_group(tmp_path: Path) -> None:
    # the leader (32 MiB) forks a child (64 MiB) in its group, as vLLM its engine core
    script = ALLOCATE.format(
        mib=32,
        rest="import subprocess; subprocess.Popen([sys.executable, '-c', "
        + repr(ALLOCATE.format(mib=64, rest="print('ready', flush=True); time.sleep(60)"))
        + "]); time.sleep(60)",
    )
    server = PythonServer(tmp_path / "log", script)
    server.serves = lambda: "ready" in server.log_tail()  # type: ignore[method-assign]
    server.start()
    try:
        pid = server.pid
        assert pid is not None
        peak = group_peak_rss_bytes(pid)
        assert peak is not None and peak >= 96 * MIB
    finally:
        server.stop()


def test_a_group_that_is_gone_has_no_peak() -> None:
    assert group_peak_rss_bytes(2**22 + 7) is None  # above Linux's pid_max default: no such group
