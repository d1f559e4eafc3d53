"""``slogate scenario sample``: what a scenario file will send, without sending
it: whole conversations picked by weight in a closed loop, arrivals in time
order in an open one, each request a JSON-able row with a short preview."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from slogate import scenarios
from slogate.scenarios.sample_view import PREVIEW_CHARS, sample_requests


def test_a_closed_loop_mix_sends_whole_conversations_picked_by_weight() -> None:
    mix = scenarios.load("mixed")
    rows = list(sample_requests(mix, 600))
    assert len(rows) == 600
    for a, b in itertools.pairwise(rows):
        if (a["scenario"], a["conversation"]) == (b["scenario"], b["conversation"]):
            assert b["turn"] == a["turn"] + 1  # a conversation's turns in order, unbroken
    starts = Counter(r["scenario"] for r in rows if r["turn"] == 0)
    total = sum(starts.values())
    weights = {s.name: s.weight for s in mix}
    for name, weight in weights.items():
        assert starts[name] / total == pytest.approx(weight, abs=0.1)
    assert all(r["arrival_s"] is None for r in rows)
    assert rows == list(sample_requests(mix, 600))  # the files' seeds: the same every time
    assert rows != list(sample_requests(mix, 600, seed=1))


def test_an_open_loop_sends_in_arrival_order(tmp_path) -> None:
    path = tmp_path / "open.yaml"
    path.write_text(
        "workload: {kind: chat, turns: 1}\n"
        "load: {rate: {rps: 20, arrival: constant}, duration: 10s}\n"
    )
    rows = list(sample_requests(scenarios.load(path), 10))
    assert [r["arrival_s"] for r in rows] == pytest.approx([0.05 * (i + 1) for i in range(10)])


def test_a_row_is_json_with_a_one_line_preview_of_the_prompt() -> None:
    [chat] = scenarios.load("chat")
    [row] = sample_requests([chat], 1)
    assert json.loads(json.dumps(row)) == row
    assert "\n" not in row["preview"] and 0 < len(row["preview"]) <= PREVIEW_CHARS
    assert row["input_tokens"] > 0 and row["max_tokens"] >= row["output_tokens"] > 0
    assert list(sample_requests([], 5)) == []
