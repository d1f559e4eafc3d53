"""`slogate run` replaying agent trees: what reaches the engine (recorded
counts, byte-shared prefixes, the parent's reply in the child's prompt) and
what the simulated engine's prefix cache makes of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_traces import OTEL, WEKA, common_tokens, count
from loadruns import requests_by_sender, slogate, summary
from recording import REPLY, recording_engine

from slogate import scenarios
from slogate.scenarios.datasets.agent_trees import implied_hit_rate

pytestmark = pytest.mark.slow


def scenario_file(
    tmp_path: Path, trace: Path, users: int, duration: str, warm: dict | None = None, **load: object
) -> Path:
    path = tmp_path / "agents.yaml"
    workload = {"kind": "agent-trace", "file": str(trace), "wait_cap_s": 0.05}
    if warm is not None:
        workload["warm_start"] = warm
    load = load or {"users": users}
    load["duration"] = duration
    path.write_text(json.dumps({"name": "agents", "workload": workload, "load": load}))
    return path


def requests(bodies: list[dict]) -> list[dict]:
    """The load's requests, not the pre-flight's probe of the route (the model alone)."""
    return [body for body in bodies if "messages" in body]


@pytest.mark.parametrize("trace", [WEKA, OTEL], ids=["weka", "otel"])
def test_the_engine_receives_each_call_as_recorded(tmp_path, trace):
    file = scenario_file(tmp_path, trace, users=1, duration="4s")
    (tree,) = scenarios.load(file)[0].workload.data.trees
    recorded = [c.input_tokens for c in tree.root.calls()]
    with recording_engine() as (server, bodies):
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = slogate(
            "run", str(file), "--host", url, "--metrics-url", "off", "--out", str(tmp_path / "out")
        )
    assert done.returncode in (0, 4), done.stderr[-3000:]
    prompts = [body["messages"][-1]["content"] for body in requests(bodies)]
    sessions = [prompts[i : i + 5] for i in range(0, len(prompts) - 4, 5)]
    assert len(sessions) >= 3, len(prompts)
    for root1, root2, sub1, sub2, root3 in sessions:
        assert [count(p) for p in (root1, root2, sub1, sub2, root3)] == recorded
        assert common_tokens(root1, root2) >= 10 * 64  # each extension resends the context's bytes
        assert common_tokens(root2, root3) >= 13 * 64
        assert common_tokens(sub1, sub2) >= 6 * 64
        assert REPLY in sub1 and REPLY not in root1  # the child got its parent's reply
    assert common_tokens(sessions[0][0], sessions[1][0]) < 16  # replays do not share
    s = summary(tmp_path / "out")["scenarios"]["agents"]
    assert s["sessions"]["failed"] == 0 and s["sessions"]["count"] >= 3
    assert s["sessions"]["wall_ms"]["count"] == s["sessions"]["answered"]
    assert s["sessions"]["ttft_by_context_ms"]["0_8k"]["count"] == s["requests"]["ok"]
    assert "Agent sessions" in (tmp_path / "out" / "report.html").read_text()
    assert "| waiting on tools, ms |" in (tmp_path / "out" / "summary.md").read_text()


def test_the_engine_cache_hits_as_the_block_structure_implies(tmp_path):
    file = scenario_file(tmp_path, WEKA, users=2, duration="15s")
    trees = scenarios.load(file)[0].workload.data.trees
    done = slogate("run", str(file), "--out", str(tmp_path / "out"))
    assert done.returncode in (0, 4), done.stderr[-3000:]
    s = summary(tmp_path / "out")["scenarios"]["agents"]
    measured = s["prefix_cache"]["hit_rate"]
    assert s["sessions"]["count"] >= 6
    assert measured == pytest.approx(implied_hit_rate(trees), abs=0.05)


def test_open_loop_starts_trees_on_the_schedule(tmp_path):
    rate = {"rps": 4, "arrival": "constant"}  # sessions per second, evenly spaced
    file = scenario_file(tmp_path, WEKA, users=0, duration="5s", rate=rate)
    with recording_engine() as (server, bodies):
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = slogate(
            "run", str(file), "--host", url, "--metrics-url", "off", "--out", str(tmp_path / "out")
        )
    assert done.returncode in (0, 4), done.stderr[-3000:]
    starts = [
        b for b in requests(bodies) if count(b["messages"][-1]["content"]) == 700
    ]  # root's first call
    assert 19 <= len(starts) <= 20  # 4 a second for 5 s, whatever the sessions before them did
    s = summary(tmp_path / "out")["scenarios"]["agents"]
    assert s["sessions"]["count"] >= 15 and s["sessions"]["failed"] == 0
    # each request's sender is its session, one per tree started
    senders = requests_by_sender(tmp_path / "out")
    assert list(senders) == ["session"] and {p for p, _ in senders["session"]} == {0}
    assert s["sessions"]["count"] <= len(senders["session"]) <= len(starts)


def test_a_warm_start_warms_with_the_call_before_it_and_measures_the_rest(tmp_path):
    # 0.9 of the root's 3 calls: the first session starts at its third call,
    # the second warms the cache (unmeasured), the first is skipped
    file = scenario_file(tmp_path, WEKA, users=1, duration="3s", warm={"min": 0.9, "max": 0.9})
    with recording_engine() as (server, bodies):
        url = f"http://127.0.0.1:{server.server_address[1]}"
        done = slogate(
            "run", str(file), "--host", url, "--metrics-url", "off", "--out", str(tmp_path / "out")
        )
    assert done.returncode in (0, 4), done.stderr[-3000:]
    sent = [count(b["messages"][-1]["content"]) for b in requests(bodies)]
    assert sent[:4] == [860, 400, 600, 1050]  # warm, the subagent after it, the measured root call
    assert sent[4:9] == [700, 860, 400, 600, 1050]  # the next session plays whole
    whole = summary(tmp_path / "out")
    s, cut = whole["scenarios"]["agents"], whole["run"]["cancelled_at_stop"]
    assert s["requests"]["ok"] == len(sent) - 1 - cut  # every request but the warm one
    assert s["sessions"]["unfinished"] == 1  # the first, started mid-way
