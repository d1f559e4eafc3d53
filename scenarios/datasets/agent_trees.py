"""Agent sessions as trees: the one form every agent-trace format is read into.

A tree is one recorded session: its root agent's model calls in order, with
subagents started between them. Each call keeps its recorded prompt and
output token counts, the ids of its prompt's full KV-cache blocks (recorded
where the format gives block hashes, derived from the context's growth where
it does not) and the wait before it (tool or think time). The planner rebuilds
every prompt from its block ids, so calls that shared blocks in production
share those bytes on the wire, and the engine's prefix cache sees the reuse
the recording saw.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slogate.scenarios.datasets.conversations import records_of
from slogate.scenarios.datasets.report import DatasetReport, Lengths
from slogate.scenarios.datasets.table import DatasetError
from slogate.scenarios.errors import quoted
from slogate.scenarios.limits import MAX_AGENT_DEPTH, MAX_TOKENS


@dataclass(frozen=True, slots=True)
class AgentCall:
    """One model call: ``blocks`` are the ids of its prompt's leading full
    blocks of the tree's block size (the rest of the prompt is its own);
    ``wait_s`` the recorded time before it was sent (tools, thinking), of
    which ``tool_s`` in tools where the format says."""

    input_tokens: int
    output_tokens: int
    blocks: tuple[int, ...]
    wait_s: float = 0.0
    tool_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Agent:
    """An agent's steps in order: its calls and the subagents it started.
    Subagents in a row run together; the agent waits for all of them before
    its next call, and each one's first prompt carries the reply of the call
    before them (the task the parent wrote)."""

    name: str
    steps: tuple[AgentCall | Agent, ...]

    def calls(self) -> Iterator[AgentCall]:
        """Every call of this agent and of the subagents under it."""
        for step in self.steps:
            if isinstance(step, Agent):
                yield from step.calls()
            else:
                yield step

    def agents(self) -> Iterator[Agent]:
        """This agent and every subagent under it."""
        yield self
        for step in self.steps:
            if isinstance(step, Agent):
                yield from step.agents()


@dataclass(frozen=True, slots=True)
class AgentTree:
    """One recorded session; ``where`` names it in the file (``file line N``).
    Block ids below ``shared_below`` are the same text in every session (a
    system prompt all sessions share); the others are the session's own."""

    name: str
    where: str
    block_tokens: int
    root: Agent
    shared_below: int = 0


@dataclass(frozen=True, slots=True)
class AgentTraceSet:
    trees: tuple[AgentTree, ...]
    report: DatasetReport


def implied_hit_rate(trees: tuple[AgentTree, ...] | list[AgentTree]) -> float:
    """The share of prompt tokens a prefix cache that never evicts serves when
    each tree is played once, calls in order: a call's leading blocks already
    sent earlier in its tree are hits; a block is known by its id and every
    id before it (a hash chained over them, as prefix caches key blocks)."""
    cached = total = 0
    for tree in trees:
        seen: set[int] = set()
        for call in tree.root.calls():
            total += call.input_tokens
            chain = list(itertools.accumulate(call.blocks, lambda h, b: hash((h, b)), initial=0))[
                1:
            ]
            hits = next((n for n in range(len(chain), 0, -1) if chain[n - 1] in seen), 0)
            cached += hits * tree.block_tokens
            seen.update(chain)
    return cached / total if total else 0.0


Parse = Callable[[list[tuple[int, Any]], str, int], list[AgentTree]]


def read_trees(path: Path, parse: Parse, block_tokens: int) -> AgentTraceSet:
    """Every tree of ``path`` (one JSON object, a JSON list of them, or JSONL):
    ``parse(records, file name, block_tokens)`` is the format's own reader,
    given each record with the line it starts on. JSON nested deeper than
    the interpreter's stack (5,000 brackets) is the file's fault, not a
    failed run."""
    try:
        trees = parse(records(path), path.name, block_tokens)
    except RecursionError:
        raise DatasetError(f"{path.name} is nested too deep to read") from None
    if not trees:
        raise DatasetError(f"{path.name} has no agent sessions")
    return AgentTraceSet(tuple(trees), report(path.name, trees))


def records(path: Path) -> list[tuple[int, Any]]:
    """``(line, record)`` pairs of a file holding one JSON object, a list or JSONL."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return records_of(path)
    return [(1, whole)] if isinstance(whole, dict) else records_of(path)


def report(source: str, trees: list[AgentTree]) -> DatasetReport:
    """What ``scenario check`` prints of the sessions read or made."""
    import numpy as np

    calls = [c for t in trees for c in t.root.calls()]
    agents = np.array([sum(1 for _ in t.root.agents()) for t in trees])
    return DatasetReport(
        source,
        "agent sessions",
        len(trees),
        {},
        (
            Lengths.of("calls", np.array([sum(1 for _ in t.root.calls()) for t in trees])),
            Lengths.of("agents", agents),
            Lengths.of("input tokens", np.array([c.input_tokens for c in calls])),
            Lengths.of("output tokens", np.array([c.output_tokens for c in calls])),
            Lengths.of("wait s", np.array([c.wait_s for c in calls])),
        ),
        (f"prefix-cache hit rate the block structure implies: {implied_hit_rate(trees):.1%}",),
    )


def field_error(where: str, field: str, expected: str, got: Any) -> DatasetError:
    return DatasetError(f"{where}, field {field!r}: expected {expected}, got {quoted(got)}")


def count(record: dict[str, Any], key: str, where: str, field: str, least: int = 0) -> int:
    """``record[key]``, a whole number from ``least`` to the token limit: a
    call of 10^12 tokens would be planned (3 GB in 5 s) before any engine
    could refuse it."""
    value = record.get(key)
    name = f"{field}.{key}" if field else key
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise field_error(where, name, f"an integer >= {least}", value)
    return within_limit(value, where, name)


def within_limit(tokens: int, where: str, field: str) -> int:
    """``tokens``, refused past :data:`MAX_TOKENS` (docs/reliability.md, "Limits")."""
    if tokens > MAX_TOKENS:
        raise DatasetError(
            f"{where}, field {field!r}: {tokens} is beyond the limit of {MAX_TOKENS} tokens"
        )
    return tokens


def nesting(depth: int, where: str, field: str) -> None:
    """Refuse subagents nested past :data:`MAX_AGENT_DEPTH`: each level is a
    frame of the readers and planners that walk the tree."""
    if depth > MAX_AGENT_DEPTH:
        raise DatasetError(
            f"{where}, field {field!r}: subagents nested more than {MAX_AGENT_DEPTH} deep"
        )


def seconds(record: dict[str, Any], key: str, where: str, field: str) -> float | None:
    """``record[key]``: a number of seconds >= 0, or None when absent."""
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise field_error(where, f"{field}.{key}", "a number of seconds >= 0", value)
    return float(value)


def derived_blocks(
    before: AgentCall | None,
    context: int,
    input_tokens: int,
    block_tokens: int,
    fresh: Iterator[int],
) -> tuple[int, ...]:
    """Block ids for a call whose format records no hashes: when its prompt
    holds at least the call before it (that prompt plus its reply), it
    extends that context and keeps its blocks; otherwise it starts afresh.
    ``context`` is the tokens the call before it saw, its reply included."""
    keep = before.blocks if before is not None and input_tokens >= context else ()
    new = input_tokens // block_tokens - len(keep)
    return keep + tuple(next(fresh) for _ in range(max(new, 0)))


def check_blocks(call: AgentCall, block_tokens: int, where: str, field: str) -> None:
    """Recorded block ids must fit in the prompt they describe."""
    if len(call.blocks) * block_tokens > call.input_tokens:
        raise DatasetError(
            f"{where}, field '{field}.hash_ids': {len(call.blocks)} blocks of {block_tokens} "
            f"tokens cover more than the call's {call.input_tokens} input tokens"
        )
