"""`slogate run` with no host: the simulated engine is started and loaded, and the
prefill/decode phenomena show in the results."""

from __future__ import annotations

import pytest
from loadruns import slogate, summary

pytestmark = pytest.mark.slow


def test_chat_without_host_runs_on_the_simulated_engine_and_ttft_rises_with_turn(tmp_path):
    out = tmp_path / "out"
    # Without prefix caching every turn prefills its whole history; two users
    # keep other conversations' prefill chunks from dominating the wait.
    profile = "llama-3.1-8b@h100:enable_prefix_caching=false"
    done = slogate(
        "run", "tests/data/chat-turns.yaml", "--profile", profile, "--users", "2",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "started the simulated engine" in done.stdout
    s = summary(out)
    assert s["run"]["engine"]["owned_by"] == "slogate-simengine"
    chat = s["scenarios"]["chat-turns"]
    assert chat["requests"]["failed"] == 0 and chat["requests"]["ok"] > 40
    p50 = [chat["ttft_by_turn_ms"][str(turn)]["p50"] for turn in (1, 2, 3, 4)]
    # each turn re-sends the growing history: longer prefill, later first token
    assert p50 == sorted(p50), p50
    assert p50[3] > 1.5 * p50[0], p50
