"""Agent traces: the Claude-Code-style (Weka) format and OpenTelemetry GenAI
spans read into trees, and each call's prompt rebuilt to its recorded count
with the recorded block sharing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from agent_traces import OTEL, WEKA, common_tokens, count

from slogate import scenarios
from slogate.scenarios.datasets.agent_trees import Agent, AgentCall, AgentTree, implied_hit_rate


def scenario(tmp_path: Path, file: Path, **workload: object) -> scenarios.model.Scenario:
    path = tmp_path / "s.yaml"
    fields = {"kind": "agent-trace", "file": str(file), **workload}
    path.write_text(json.dumps({"workload": fields, "load": {"users": 1, "duration": "10s"}}))
    return scenarios.load(path)[0]


def tree_of(tmp_path: Path, file: Path):
    (tree,) = scenario(tmp_path, file).workload.data.trees
    return tree


def shape(agent: Agent) -> list:
    """Each step as (input, output, blocks, wait) or a nested list for a subagent."""
    return [
        shape(s)
        if isinstance(s, Agent)
        else (s.input_tokens, s.output_tokens, len(s.blocks), round(s.wait_s, 3))
        for s in agent.steps
    ]


EXPECTED = [
    (700, 40, 10, 0.0),
    (860, 50, 13, 0.5),
    [(400, 30, 6, 0.0), (600, 20, 9, 0.3)],
    (1050, 60, 16, 0.4),
]


@pytest.mark.parametrize("file", [WEKA, OTEL], ids=["weka", "otel"])
def test_both_formats_read_into_the_same_tree(tmp_path, file):
    tree = tree_of(tmp_path, file)
    assert tree.block_tokens == 64
    assert shape(tree.root) == EXPECTED
    calls = list(tree.root.calls())
    assert calls[1].blocks[:10] == calls[0].blocks  # extends its predecessor's context
    assert calls[4].blocks[:13] == calls[1].blocks
    assert calls[3].blocks[:6] == calls[2].blocks
    assert not set(calls[2].blocks) & set(calls[0].blocks)  # the subagent starts afresh


def test_otel_tool_spans_are_the_tool_time(tmp_path):
    calls = list(tree_of(tmp_path, OTEL).root.calls())
    assert [round(c.tool_s, 3) for c in calls] == [0.0, 0.5, 0.0, 0.3, 0.0]


def test_implied_hit_rate_counts_shared_leading_blocks(tmp_path):
    # by hand: 10, 6 and 13 blocks of 64 tokens come from earlier calls
    rate = implied_hit_rate([tree_of(tmp_path, WEKA)])
    assert rate == pytest.approx((10 + 6 + 13) * 64 / (700 + 860 + 400 + 600 + 1050))


def test_a_chain_breaks_at_the_first_block_not_sent_before():
    calls = (AgentCall(200, 1, (1, 2, 3)), AgentCall(200, 1, (1, 9, 3)))
    tree = AgentTree("t", "here", 64, Agent("root", calls))
    assert implied_hit_rate([tree]) == pytest.approx(64 / 400)  # block 3 follows 9 now


def turns_of(tmp_path: Path, file: Path, task: str = "TASK: find where the parser fails.\n"):
    """Every call's planned request, the subagent's first with ``task``."""
    planner = scenarios.Planner(scenario(tmp_path, file), seed=0)
    session = planner.session()
    out = []
    for k, step in enumerate(session.root.steps):
        if isinstance(step, Agent):
            out += [session.turn(c, j, task if j == 0 else None) for j, c in enumerate(step.steps)]
        else:
            out.append(session.turn(step, k))
    return out, session.tree


@pytest.mark.parametrize("file", [WEKA, OTEL], ids=["weka", "otel"])
def test_prompts_have_the_recorded_counts_and_sharing(tmp_path, file):
    turns, tree = turns_of(tmp_path, file)
    calls = list(tree.root.calls())
    for turn, call in zip(turns, calls, strict=True):
        assert count(turn.user_text) == call.input_tokens == turn.intended_input_tokens
        assert turn.max_tokens == call.output_tokens
    root1, root2, sub1, sub2, root3 = (t.user_text for t in turns)
    assert common_tokens(root1, root2) >= 10 * 64
    assert common_tokens(root2, root3) >= 13 * 64
    assert common_tokens(sub1, sub2) >= 6 * 64  # the task region too, byte for byte
    assert common_tokens(root1, sub1) < 64
    assert "TASK: find where the parser fails." in sub1 and "TASK" not in sub2[-200:]


def test_replays_of_one_tree_share_nothing(tmp_path):
    planner = scenarios.Planner(scenario(tmp_path, WEKA), seed=0)
    first, second = planner.session(), planner.session()
    call = next(first.root.calls())
    assert common_tokens(first.turn(call, 0).user_text, second.turn(call, 0).user_text) < 16


def test_waits_are_capped(tmp_path):
    path = tmp_path / "slow.json"
    data = json.loads(WEKA.read_text())
    data["requests"][1]["think_time"] = 120
    path.write_text(json.dumps(data))
    session = scenarios.Planner(scenario(tmp_path, path, wait_cap_s=2), seed=0).session()
    assert [session.wait_s(c) for c in session.root.calls()] == [0, 2, 0, 0.3, 0.4]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["requests"][1].update({"in": "many"}),
            "field 'requests[1].in': expected an integer >= 1, got 'many'",
        ),
        (
            lambda d: d["requests"][2]["requests"][0].update({"hash_ids": [1, -2]}),
            "field 'requests[2].requests[0].hash_ids': expected a list of integers >= 0",
        ),
        (
            lambda d: d["requests"][0].update({"in": 100}),
            "field 'requests[0].hash_ids': 10 blocks of 64 tokens cover more than the call's 100",
        ),
        (
            lambda d: d["requests"][3].update({"type": "x"}),
            "field 'requests[3].type': expected 'n', 's' or 'subagent', got 'x'",
        ),
        (lambda d: d.pop("block_size"), "field 'block_size': expected an integer >= 1, got None"),
        (
            lambda d: d["requests"][2].pop("agent_id"),
            "field 'requests[2].agent_id': expected a non-empty string, got None",
        ),
    ],
)
def test_bad_weka_traces_name_file_line_and_field(tmp_path, change, message):
    data = json.loads(WEKA.read_text())
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenario(tmp_path, path)
    assert f"workload.file: bad.json line 1, {message}" in str(caught.value)


def test_weka_jsonl_names_the_line_of_the_bad_session(tmp_path):
    good = json.loads(WEKA.read_text())
    bad = json.loads(WEKA.read_text())
    bad["requests"][0]["out"] = -1
    path = tmp_path / "many.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(
        scenarios.ScenarioError, match=re.escape("many.jsonl line 2, field 'requests")
    ):
        scenario(tmp_path, path)


def test_bad_otel_spans_name_the_span_and_attribute(tmp_path):
    data = json.loads(OTEL.read_text())
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[3]["attributes"] = [
        a for a in spans[3]["attributes"] if a["key"] != "gen_ai.usage.input_tokens"
    ]
    path = tmp_path / "spans.json"
    path.write_text(json.dumps(data))
    with pytest.raises(scenarios.ScenarioError) as caught:
        scenario(tmp_path, path)
    assert (
        "spans.json line 1, span c000000000000002 ('chat main-model'), attribute "
        "'gen_ai.usage.input_tokens': expected an integer >= 1, got None"
    ) in str(caught.value)


def test_agent_trees_start_at_arrivals_not_recorded_times(tmp_path):
    path = tmp_path / "s.yaml"
    workload = {"kind": "agent-trace", "file": str(WEKA)}
    for arrival, ok in (("poisson", True), ("trace", False)):
        rate = {"rps": 2, "arrival": arrival} if arrival != "trace" else {"arrival": "trace"}
        path.write_text(
            json.dumps({"workload": workload, "load": {"rate": rate, "duration": "5s"}})
        )
        if ok:
            assert scenarios.load(path)[0].load.open_loop
            continue
        with pytest.raises(scenarios.ScenarioError, match=re.escape("load.rate")):
            scenarios.load(path)
