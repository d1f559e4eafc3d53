"""`slogate run` with no host: the simulated engine is started and loaded, and the
prefill/decode phenomena show in the results."""

from __future__ import annotations

import pytest
from loadruns import scenario_file, slogate, summary

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


def test_multi_turn_prefix_cache_rate_agrees_with_the_engine_counters(tmp_path):
    """Each turn re-sends its conversation: the replies' cached_tokens give a
    token-weighted rate equal to the engine's vllm:prefix_cache counters over
    the run (but for the requests the stop cut off, which the engine counted),
    each conversation's own rate, and TTFT of hits and misses, in summary.json,
    summary.md and the report."""
    out = tmp_path / "out"
    done = slogate(
        "run", "tests/data/chat-turns.yaml", "--users", "2", "--duration", "12s",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    s = summary(out)
    cache = s["scenarios"]["chat-turns"]["prefix_cache"]
    ok = s["scenarios"]["chat-turns"]["requests"]["ok"]
    assert cache["reported"] == cache["requests"] == ok > 8
    assert 0.2 < cache["hit_rate"] < 1.0
    assert cache["hit_requests"] == cache["ttft_hit_ms"]["count"] > 0
    assert cache["ttft_hit_ms"]["count"] + cache["ttft_miss_ms"]["count"] == ok
    assert cache["conversations"]["count"] >= 2
    engine = s["engine_latency"]["prefix_cache"]
    assert engine["client_cached_tokens"] == cache["cached_tokens"]
    assert engine["client_prompt_tokens"] == cache["prompt_tokens"]
    if s["run"]["cancelled_at_stop"] == 0:
        assert engine["engine_hits"] == cache["cached_tokens"]
        assert engine["engine_queries"] == cache["prompt_tokens"]
    else:  # the engine also counted the prompts of the requests the stop cut off
        assert engine["engine_hits"] >= cache["cached_tokens"]
        assert engine["engine_queries"] > cache["prompt_tokens"]
        assert abs(engine["engine_hit_rate"] - cache["hit_rate"]) < 0.1
    assert "prefix-cache hit rate" in (out / "summary.md").read_text()
    assert 'id="prefix-cache-1"' in (out / "report.html").read_text()


def test_cancelled_requests_are_apart_and_the_engine_lets_go(tmp_path):
    """A scenario that cancels 40% of its requests after 10 tokens: they are
    counted apart (no error, no latency sample), the run ends with the engine's
    running requests back at 0, and summary.json, summary.md and the report say so."""
    out = tmp_path / "out"
    scenario = scenario_file(tmp_path, "chat-turns", cancel={"share": 0.4, "after_tokens": 10})
    done = slogate("run", str(scenario), "--users", "4", "--duration", "12s", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    s = summary(out)
    requests = s["scenarios"]["chat-turns"]["requests"]
    assert requests["cancelled"] > 3 and requests["failed"] == 0
    assert requests["total"] == requests["ok"]
    assert s["scenarios"]["chat-turns"]["metrics"]["ttft_ms"]["count"] == requests["ok"]
    release = s["server_release"]
    assert release["cancelled"] == requests["cancelled"]
    assert release["released"] is True and release["running_after"] == 0
    assert release["waited_s"] < release["bound_s"]
    assert "closed requests" in (out / "summary.md").read_text()
    report = (out / "report.html").read_text()
    assert 'id="release"' in report and "Released:" in report


def test_a_drained_run_measures_every_request_the_engine_timed(tmp_path):
    """With --drain the requests in flight at the end finish and are measured
    (none is cut off, none starts after the end), so the engine's own
    histograms and counters over the run hold exactly the client's requests."""
    out = tmp_path / "out"
    done = slogate(
        "run", "tests/data/chat-turns.yaml", "--users", "4", "--duration", "8s",
        "--warmup", "0s", "--drain", "60s", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    s = summary(out)
    assert s["run"]["cancelled_at_stop"] == 0
    requests = s["scenarios"]["chat-turns"]["requests"]
    engine = s["engine_latency"]
    assert engine["ttft_ms"]["count"] == engine["ttft_ms"]["client_count"] == requests["ok"]
    assert engine["itl_ms"]["count"] == engine["itl_ms"]["client_count"] > 0
    cache = engine["prefix_cache"]
    assert cache["engine_hits"] == cache["client_cached_tokens"]
    assert cache["engine_queries"] == cache["client_prompt_tokens"]
