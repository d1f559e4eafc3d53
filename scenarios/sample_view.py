"""Planned requests as plain dicts, for ``slogate scenario sample``: what a
scenario will send, without sending it."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Any

from slogate.scenarios.arrivals import has_arrivals
from slogate.scenarios.model import PlannedTurn, Scenario
from slogate.scenarios.planner import Planner

PREVIEW_CHARS = 80
MIX_TAG = 3


def sample_requests(
    scenarios: list[Scenario], n: int, seed: int | None = None
) -> Iterator[dict[str, Any]]:
    """The first ``n`` requests the scenarios (one file's, weights summing to 1)
    would send from stream 0: open loop in arrival order, closed loop as whole
    conversations picked by weight. ``seed`` defaults to each scenario's own."""
    if not scenarios:
        return
    planners = [Planner(s, s.seed if seed is None else seed) for s in scenarios]
    turns: Iterator[PlannedTurn]
    if has_arrivals(scenarios[0].load):
        turns = heapq.merge(
            *(p.arrivals(rate_scale=p.scenario.weight) for p in planners if p.scenario.weight),
            key=_arrival,
        )
    else:
        turns = _conversations(planners, 0 if seed is None else seed)
    for turn in itertools.islice(turns, n):
        yield describe(turn)


def _arrival(turn: PlannedTurn) -> float:
    assert turn.arrival_s is not None  # Planner.arrivals sets it on every turn
    return turn.arrival_s


def _conversations(planners: list[Planner], seed: int) -> Iterator[PlannedTurn]:
    import numpy as np

    rng = np.random.default_rng([seed, MIX_TAG])
    weights = np.array([p.scenario.weight for p in planners])
    while True:
        planner = planners[int(rng.choice(len(planners), p=weights / weights.sum()))]
        yield from planner.conversation().turns


def describe(turn: PlannedTurn) -> dict[str, Any]:
    """A JSON-able summary of one planned request, with a one-line text preview."""
    preview = " ".join(turn.user_text[: PREVIEW_CHARS * 2].split())[:PREVIEW_CHARS]
    row = {
        "scenario": turn.scenario,
        "conversation": turn.conversation,
        "turn": turn.turn,
        "arrival_s": None if turn.arrival_s is None else round(turn.arrival_s, 6),
        "think_time_s": round(turn.think_time_s, 3),
        "input_tokens": turn.intended_input_tokens,
        "output_tokens": turn.intended_output_tokens,
        "max_tokens": turn.max_tokens,
        "prefix_id": turn.prefix_id,
        "history_messages": None if turn.history is None else len(turn.history),
        "preview": preview,
    }
    if turn.constraint is not None:  # structured outputs: what is sent (None: unconstrained)
        row["response_format"] = turn.constraint.response_format
    return row
