"""The engine a command loads: a named host checked before any load (exit 2
for wrong flags, 3 for an engine that is down or not OpenAI-compatible), else
a simulated engine that lives as long as the block."""

from __future__ import annotations

import socket
import urllib.request

import pytest

from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
from slogate.target import TargetError, target_engine


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_profile_beside_a_host_is_a_flag_error() -> None:
    with (
        pytest.raises(TargetError, match="--profile") as info,
        target_engine("http://127.0.0.1:9", "llama-3.1-8b@h100", None),
    ):
        pass
    assert info.value.code == EXIT_CONFIG


def test_an_unknown_profile_is_a_flag_error_before_any_engine_starts() -> None:
    with (
        pytest.raises(TargetError, match="no-such-gpu") as info,
        target_engine(None, "llama-3.1-8b@no-such-gpu", None),
    ):
        pass
    assert info.value.code == EXIT_CONFIG


def test_a_host_nobody_listens_on_is_a_failed_run_not_a_flag_error() -> None:
    with (
        pytest.raises(TargetError) as info,
        target_engine(f"http://127.0.0.1:{closed_port()}", None, None),
    ):
        pass
    assert info.value.code == EXIT_INVALID


@pytest.mark.slow  # an engine process starts (2 to 6 s)
def test_without_a_host_a_simulated_engine_serves_the_block_and_stops_after() -> None:
    with target_engine(None, None, None, speedup=10.0) as url:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as reply:
            assert reply.status == 200
        with target_engine(url, None, None) as named:  # a named host that answers
            assert named == url
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{url}/v1/models", timeout=2)
