"""Agent sessions as results: per-session wall, engine and tool time and
tokens, TTFT by context band, SLOs on them, SLO tiers of a sweep, and the
coding-agent generator's sessions against the statistics it cites."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest
from agent_traces import common_tokens

from slogate import scenarios
from slogate.analysis.documents.summary import sessions_block
from slogate.analysis.measurement.bands import context_band
from slogate.analysis.measurement.recorder import Recorder
from slogate.analysis.measurement.records import RequestRecord, SessionRecord
from slogate.analysis.verdict.slo import Verdict, evaluate
from slogate.scenarios.datasets.agent_trees import AgentCall
from slogate.scenarios.model import Threshold
from slogate.studies.tiers import tier_max

MS = 1_000_000


def request(ttft_ms: int, prompt: int) -> RequestRecord:
    record = RequestRecord("agents", start_ns=0)
    record.chunk_ns = [ttft_ms * MS, (ttft_ms + 10) * MS]
    record.chunk_chars = [4, 4]
    record.end_ns = (ttft_ms + 10) * MS
    record.output_tokens = 2
    record.input_tokens = prompt
    return record


@pytest.mark.parametrize(
    ("tokens", "band"),
    [(1, "0_8k"), (8191, "0_8k"), (8192, "8_32k"), (32767, "8_32k"), (32768, "32_128k"),
     (131071, "32_128k"), (131072, "128k_up"), (2_000_000, "128k_up")],
)  # fmt: skip
def test_context_bands_have_fixed_edges(tokens, band):
    assert context_band(tokens) == f"ttft_ctx_{band}"


def test_sessions_block_holds_the_session_table():
    recorder = Recorder()
    recorder.record(request(100, 4_000), wall_s=1.0)
    recorder.record(request(900, 40_000), wall_s=1.0)
    recorder.record(request(1_100, 50_000), wall_s=1.0)
    recorder.record_session(
        "agents", SessionRecord(3, 0, 20_000 * MS, "answered", 15_000 * MS, 4_000 * MS, 95_000)
    )
    recorder.record_session(
        "agents", SessionRecord(2, 0, 9_000 * MS, "failed", 2_000 * MS, 0, 1_000)
    )
    block = sessions_block(recorder.bucket("agents", "all"))
    assert (block["count"], block["answered"], block["failed"]) == (2, 1, 1)
    assert block["wall_ms"]["count"] == 1 and block["wall_ms"]["max"] == pytest.approx(
        20_000, rel=1e-3
    )
    assert block["engine_ms"]["max"] == pytest.approx(15_000, rel=1e-3)
    assert block["tool_ms"]["max"] == pytest.approx(4_000, rel=1e-3)
    assert block["tokens"]["max"] == pytest.approx(95_000, rel=1e-3)
    bands = block["ttft_by_context_ms"]
    assert sorted(bands) == ["0_8k", "32_128k"]
    assert bands["32_128k"]["count"] == 2
    assert bands["32_128k"]["max"] == pytest.approx(1_100, rel=1e-3)


def test_slos_on_a_band_and_on_sessions_are_judged():
    recorder = Recorder()
    for ttft in range(100, 400, 3):
        recorder.record(request(ttft, 40_000), wall_s=1.0)
        recorder.record_session("agents", SessionRecord(4, 0, ttft * 100 * MS, "answered", 0, 0, 1))
    bucket = recorder.bucket("agents", "all")
    band = evaluate("agents", Threshold("ttft_ctx_32_128k_ms", "p50", 300), bucket, 10.0)
    assert band.verdict is Verdict.PASS and band.value == pytest.approx(250, rel=0.02)
    missing = evaluate("agents", Threshold("ttft_ctx_8_32k_ms", "p99", 300), bucket, 10.0)
    assert missing.verdict is Verdict.INCONCLUSIVE and missing.count == 0
    session = evaluate("agents", Threshold("session_ms", "p50", 20_000), bucket, 10.0)
    assert session.verdict is Verdict.FAIL and session.value == pytest.approx(25_000, rel=0.02)


def test_a_tier_holds_up_to_its_first_failure():
    assert tier_max([(1, True), (2, True), (4, False), (8, True)]) == 2
    assert tier_max([(4, True), (1, True), (2, True)]) == 4
    assert tier_max([(1, False), (2, True)]) is None


def test_tiers_are_read_beside_the_gating_slo(tmp_path):
    path = tmp_path / "t.yaml"
    tiers = {"interactive": {"session_ms": {"p95": 1000}}, "batch": {"ttft_ms": {"p99": 9000}}}
    path.write_text(json.dumps({"workload": {"kind": "chat"}, "slo_tiers": tiers}))
    (scenario,) = scenarios.load(path)
    assert [(name, spec.thresholds) for name, spec in scenario.slo_tiers] == [
        ("interactive", (Threshold("session_ms", "p95", 1000),)),
        ("batch", (Threshold("ttft_ms", "p99", 9000),)),
    ]
    path.write_text(json.dumps({"workload": {"kind": "chat"}, "slo_tiers": {"x": {"ttft_ms": 3}}}))
    with pytest.raises(scenarios.ScenarioError, match=re.escape("slo_tiers.x.ttft_ms")):
        scenarios.load(path)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Sessions made with generate:'s defaults, the published figures."""
    path = tmp_path_factory.mktemp("made") / "made.yaml"
    path.write_text(json.dumps({"workload": {"kind": "agent-trace", "generate": {}}}))
    return scenarios.load(path)[0].workload.data.trees


def test_generated_sessions_follow_the_cited_statistics(made):
    roots = [[s for s in t.root.steps if isinstance(s, AgentCall)] for t in made]
    outputs = [c.output_tokens for calls in roots for c in calls]
    assert np.mean(outputs) == pytest.approx(1000, rel=0.1)  # AIPerf agentic-code: mean 1,000
    assert max(outputs) <= 1500
    first = [calls[0].input_tokens for calls in roots]
    assert np.mean(first) == pytest.approx(32_000 + 15_000, rel=0.1)  # shared 32k + initial 15k
    growth = [
        b.input_tokens - a.input_tokens - a.output_tokens
        for calls in roots
        for a, b in itertools.pairwise(calls)
    ]
    # new input per turn: around 6,000, capped at 10,000, which (with the sessions that
    # end before 167k) pulls the mean below 6,000
    assert 5_000 < np.mean(growth) < 6_000
    assert max(c.input_tokens for calls in roots for c in calls) <= 167_000
    assert (
        8 <= np.mean([len(calls) for calls in roots]) <= 12.5
    )  # 11.6, less the sessions cut at 167k
    subagents = [sum(1 for _ in t.root.agents()) - 1 for t in made]
    assert np.mean(subagents) == pytest.approx(3, abs=1)


def test_generated_sessions_share_the_system_prompt_and_nothing_else(made):
    planner = scenarios.Planner(scenarios.load("coding-agent")[0], seed=0)
    one, two = planner.session(), planner.session()
    first = [next(s.root.calls()) for s in (one, two)]
    texts = [s.turn(c, 0).user_text for s, c in zip((one, two), first, strict=True)]
    shared = common_tokens(*texts)
    assert 32_000 <= shared < 32_000 + 64  # the tools and system prompt, then each its own
    root = [s for s in one.root.steps if isinstance(s, AgentCall)]
    assert all(b.blocks[: len(a.blocks)] == a.blocks for a, b in itertools.pairwise(root))
