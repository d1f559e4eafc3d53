"""``python -m slogate.simengine``, the config it builds, and the child-process launcher."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from slogate.engines.simulated import EngineStartError, engine_command, start_engine
from slogate.simengine.__main__ import build_parser, main, overrides_from_args
from slogate.simengine.config import build_config
from slogate.simengine.faults import FaultError


def test_flags_become_config() -> None:
    args = build_parser().parse_args(
        [
            "--profile",
            "qwen2.5-7b@l40s:fp8",
            "--speedup",
            "3",
            "--stream-interval",
            "2",
            "--max-num-seqs",
            "64",
            "--no-enable-prefix-caching",
            "--set",
            "eos_median=50",
            "--set",
            "served_model_name=my-model",
            "--fault",
            "http_429_rate=0.25",
            "--fault",
            "stall_s=1.5",
        ]
    )
    config = build_config(args.profile, **overrides_from_args(args))
    assert config.profile.name == "qwen2.5-7b@l40s:fp8"
    assert config.speedup == 3 and config.stream_interval == 2
    assert config.profile.scheduler_max_num_seqs == 64 and not config.profile.enable_prefix_caching
    assert config.eos.median == 50 and config.model_name == "my-model"
    assert config.faults.http_429_rate == 0.25 and config.faults.stall_s == 1.5


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown engine setting"):
        build_config(colour="red")
    with pytest.raises(FaultError, match="unknown fault"):
        build_config(faults={"http_418_rate": 1})
    assert main(["--profile", "gpt-5@h100"]) == 2


def test_list_profiles(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--list-profiles"]) == 0
    out = capsys.readouterr().out
    assert "llama-3.1-70b" in out and "h200" in out and "int4" in out


def test_launch_reports_a_start_failure() -> None:
    with pytest.raises(EngineStartError, match="unknown model"):
        start_engine("gpt-5@h100", ready_timeout=30)


@pytest.mark.slow
def test_engine_exits_when_its_parent_dies() -> None:
    """The child watches its stdin: a parent killed with SIGKILL leaves no engine behind."""
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from slogate.engines.simulated import start_engine; "
            "e = start_engine(); print(e.pid, flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
    )
    assert parent.stdout is not None
    engine_pid = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{engine_pid}/stat") as stat:
                if stat.read().split(") ")[1].startswith("Z"):
                    break  # exited, waiting to be reaped by init
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        os.kill(engine_pid, signal.SIGKILL)
        pytest.fail("the engine outlived its parent")


def test_engine_command_passes_settings_as_json() -> None:
    command = engine_command("llama-3.1-8b@h100", speedup=2.5, faults={"stall_s": 1})
    assert command[1:3] == ["-m", "slogate.simengine"]
    assert "speedup=2.5" in command and "stall_s=1" in command and "--exit-with-stdin" in command
