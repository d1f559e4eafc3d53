"""Claude-Code-style agent traces with subagents, as the Weka KV-cache-tester
records them and AIPerf (the AgentX benchmark), inference-perf and GuideLLM
read them: one JSON object per session, ``block_size`` tokens per KV block,
``requests`` in order, each a call (``type`` ``n`` or ``s``: ``t`` seconds
from the start, ``in``/``out`` tokens, ``hash_ids`` of its prompt's blocks,
``think_time`` before it, ``api_time`` it took) or a subagent (``type:
subagent``, ``agent_id``, its own nested ``requests``). Other keys (``model``,
``stop``, ``input_types``, ``totals``...) are read past.
"""

from __future__ import annotations

from typing import Any

from slogate.scenarios.datasets.agent_trees import (
    Agent,
    AgentCall,
    AgentTree,
    check_blocks,
    count,
    field_error,
    nesting,
    seconds,
)

CALL_TYPES = ("n", "s")
SUBAGENT = "subagent"


def parse(records: list[tuple[int, Any]], name: str, block_tokens: int) -> list[AgentTree]:
    """Each record is one session; its own ``block_size`` replaces ``block_tokens``."""
    return [read_tree(record, f"{name} line {line}") for line, record in records]


def read_tree(record: Any, where: str) -> AgentTree:
    if not isinstance(record, dict):
        raise field_error(where, "(record)", "a JSON object with requests", record)
    block = count(record, "block_size", where, "", least=1)
    name = str(record.get("id", where))
    return AgentTree(name, where, block, _agent(record, name, where, "", block, 0))


def _agent(
    record: dict[str, Any], name: str, where: str, field: str, block: int, depth: int
) -> Agent:
    items = record.get("requests")
    path = f"{field}.requests" if field else "requests"
    nesting(depth, where, path)
    if not isinstance(items, list) or not items:
        raise field_error(where, path, "a non-empty list of requests", items)
    steps: list[AgentCall | Agent] = []
    end_s: float | None = None  # when the call before ended, where the trace says
    for i, item in enumerate(items):
        at = f"{path}[{i}]"
        if not isinstance(item, dict) or item.get("type") not in (*CALL_TYPES, SUBAGENT):
            kind = item.get("type") if isinstance(item, dict) else item
            raise field_error(where, f"{at}.type", "'n', 's' or 'subagent'", kind)
        if item["type"] == SUBAGENT:
            agent_id = item.get("agent_id")
            if not isinstance(agent_id, str) or not agent_id:
                raise field_error(where, f"{at}.agent_id", "a non-empty string", agent_id)
            steps.append(_agent(item, f"{name}/{agent_id}", where, at, block, depth + 1))
            continue
        call = _call(item, where, at, end_s)
        check_blocks(call, block, where, at)
        steps.append(call)
        start, took = seconds(item, "t", where, at), seconds(item, "api_time", where, at)
        end_s = start + took if start is not None and took is not None else None
    return Agent(name, tuple(steps))


def _call(item: dict[str, Any], where: str, at: str, end_s: float | None) -> AgentCall:
    """The wait before a call is its ``think_time``, else the gap from the end
    of the call before it (``t`` + ``api_time``) to its ``t``, else none."""
    ids = item.get("hash_ids", [])
    if not isinstance(ids, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids
    ):
        raise field_error(where, f"{at}.hash_ids", "a list of integers >= 0", ids)
    wait = seconds(item, "think_time", where, at)
    start = seconds(item, "t", where, at)
    if wait is None:
        wait = max(start - end_s, 0.0) if start is not None and end_s is not None else 0.0
    return AgentCall(
        input_tokens=count(item, "in", where, at, least=1),
        output_tokens=count(item, "out", where, at),
        blocks=tuple(ids),
        wait_s=wait,
    )
