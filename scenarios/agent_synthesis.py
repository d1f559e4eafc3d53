"""Coding-agent sessions made from published statistics, for scenarios with
no trace file (the built-in ``coding-agent``): trees of the shape the
published agent traces report.

A session's root agent starts from a prompt of the shared tools and system
prompt (the same blocks in every session, as in production) plus its own
initial context, and each call extends the one before it: the context grows
by the reply and the new input (tool results, the user's words), as the
recorded Claude Code sessions do, until its turns are done or the context
would pass ``max_context``. Subagents start after random calls of the root,
each with its own shared prefix, a task and a few calls of its own. Every
draw comes from the scenario's seed, so every worker makes the same sessions.
The figures and their sources are in docs/scenarios.md ("coding-agent").
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from slogate.scenarios.datasets.agent_trees import (
    Agent,
    AgentCall,
    AgentTraceSet,
    AgentTree,
    report,
)
from slogate.scenarios.distributions import Dist, dist_field
from slogate.scenarios.limits import MAX_SECONDS, MAX_TOKENS
from slogate.scenarios.schema import Reader, integer, optional

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

MAX_SESSIONS = 10_000
MAX_COUNT = 1000


def gamma(mean: float, cv: float, low: float, high: float) -> dict[str, Any]:
    return {"dist": "gamma", "mean": mean, "cv": cv, "min": low, "max": high}


FIELDS = {
    "seed": optional(integer(ge=0), 0),
    "sessions": optional(integer(ge=1, le=MAX_SESSIONS), 64),
    "block_tokens": optional(integer(ge=2, le=MAX_TOKENS), 64),
    "max_context": optional(integer(ge=2, le=MAX_TOKENS), 167_000),
    "system_tokens": optional(integer(ge=0, le=MAX_TOKENS), 32_000),
    "initial_tokens": dist_field(1, MAX_TOKENS, gamma(15_000, 0.5, 1_000, 60_000)),
    "new_tokens": dist_field(1, MAX_TOKENS, gamma(6_000, 0.6, 200, 10_000)),
    "output_tokens": dist_field(1, MAX_TOKENS, gamma(1_000, 0.4, 50, 1_500)),
    "turns": dist_field(1, MAX_COUNT, gamma(11.6, 0.8, 1, 40)),
    "tool_s": dist_field(
        0, MAX_SECONDS, {"dist": "lognormal", "median": 1.0, "p90": 6.0, "max": 60}
    ),
    "subagents": dist_field(0, MAX_COUNT, gamma(3, 1.0, 0, 12)),
    "subagent_system_tokens": optional(integer(ge=0, le=MAX_TOKENS), 4_160),
    "subagent_task_tokens": dist_field(1, MAX_TOKENS, gamma(1_000, 0.5, 100, 8_000)),
    "subagent_turns": dist_field(1, MAX_COUNT, gamma(4, 0.7, 1, 20)),
    "subagent_new_tokens": dist_field(1, MAX_TOKENS, gamma(2_000, 0.6, 100, 8_000)),
    "subagent_output_tokens": dist_field(1, MAX_TOKENS, gamma(800, 0.5, 20, 1_500)),
}


@dataclass(frozen=True, slots=True)
class Layer:
    """What one kind of agent draws: its shared prefix (block ids the same in
    every session), its first own input, and per call the new input and reply."""

    shared: tuple[int, ...]
    first: Dist
    new: Dist
    output: Dist
    turns: Dist


def read_generate(reader: Reader, value: Any, path: str) -> dict[str, Any] | None:
    return reader.section(value, path, FIELDS)


def generate(f: dict[str, Any]) -> AgentTraceSet:
    """``f["sessions"]`` trees from the ``generate:`` fields, the same for a seed."""
    import numpy as np

    block = f["block_tokens"]
    root_shared = tuple(range(f["system_tokens"] // block))
    sub_shared = tuple(
        range(len(root_shared), len(root_shared) + f["subagent_system_tokens"] // block)
    )
    root = Layer(root_shared, f["initial_tokens"], f["new_tokens"], f["output_tokens"], f["turns"])
    sub = Layer(
        sub_shared,
        f["subagent_task_tokens"],
        f["subagent_new_tokens"],
        f["subagent_output_tokens"],
        f["subagent_turns"],
    )
    trees = []
    for index in range(f["sessions"]):
        rng = np.random.default_rng([f["seed"], index])
        fresh = itertools.count(len(root_shared) + len(sub_shared))
        calls = _calls(rng, root, f, fresh)
        spawns = int(f["subagents"].sample_int(rng, 1)[0])
        after = sorted(rng.integers(0, len(calls), spawns)) if len(calls) > 1 else []
        steps: list[AgentCall | Agent] = []
        for k, call in enumerate(calls):
            steps.append(call)
            for j in range(sum(1 for a in after if a == k)):
                sub_calls = _calls(rng, sub, f, fresh)
                if sub_calls:
                    steps.append(Agent(f"session-{index}/subagent-{k}-{j}", tuple(sub_calls)))
        name = f"session-{index}"
        shared = len(root_shared) + len(sub_shared)
        trees.append(AgentTree(name, f"generated {name}", block, Agent(name, tuple(steps)), shared))
    return AgentTraceSet(tuple(trees), report("generated sessions", trees))


def _calls(
    rng: np.random.Generator, layer: Layer, f: dict[str, Any], fresh: itertools.count
) -> list[AgentCall]:
    """One agent's calls: its context grows by each reply and new input."""
    block, cap = f["block_tokens"], f["max_context"]
    context = len(layer.shared) * block + int(layer.first.sample_int(rng, 1)[0])
    blocks: tuple[int, ...] = layer.shared
    calls = []
    for turn in range(int(layer.turns.sample_int(rng, 1)[0])):
        if context > cap:
            break
        blocks = blocks + tuple(next(fresh) for _ in range(context // block - len(blocks)))
        output = int(layer.output.sample_int(rng, 1)[0])
        wait = float(f["tool_s"].sample(rng, 1)[0]) if turn else 0.0
        calls.append(AgentCall(context, output, blocks, wait, wait))
        context += output + int(layer.new.sample_int(rng, 1)[0])
    return calls
