"""Agent sessions from OpenTelemetry traces with the GenAI semantic
conventions, exported as OTLP JSON (``{"resourceSpans": [{"scopeSpans":
[{"spans": [...]}]}]}``, one document or one per line as the collector's file
exporter writes them).

Each trace (``traceId``) is one session. Spans are told apart by
``gen_ai.operation.name``: ``invoke_agent`` / ``create_agent`` spans are
agents, ``chat`` / ``text_completion`` / ``generate_content`` spans model
calls (``gen_ai.usage.input_tokens`` and ``gen_ai.usage.output_tokens``),
``execute_tool`` spans tools; other spans only carry the parent links. A
call or tool belongs to its nearest agent ancestor (the trace itself when it
has no agent span); an agent under another is its subagent. The wait before a
call is the gap since the agent's step before it ended, and the tool spans
inside that gap are its tool time. OTel records no block hashes, so a call
whose prompt holds the call before it (prompt and reply) extends that
context and keeps its blocks; others start afresh.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from slogate.scenarios.datasets.agent_trees import (
    Agent,
    AgentCall,
    AgentTree,
    derived_blocks,
    field_error,
    nesting,
    within_limit,
)
from slogate.scenarios.datasets.table import DatasetError
from slogate.scenarios.errors import quoted

OPERATION = "gen_ai.operation.name"
INPUT = "gen_ai.usage.input_tokens"
OUTPUT = "gen_ai.usage.output_tokens"
AGENT_OPERATIONS = ("invoke_agent", "create_agent")
CALL_OPERATIONS = ("chat", "text_completion", "generate_content")
TOOL_OPERATION = "execute_tool"
VALUE_KEYS = ("stringValue", "intValue", "doubleValue", "boolValue")
NS = 1e9


@dataclass(frozen=True, slots=True)
class Span:
    trace: str
    span: str
    parent: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    where: str

    @property
    def operation(self) -> str | None:
        value = self.attributes.get(OPERATION)
        return value if isinstance(value, str) else None


def parse(records: list[tuple[int, Any]], name: str, block_tokens: int) -> list[AgentTree]:
    """Every trace of the file's OTLP documents as one session."""
    spans: dict[str, list[Span]] = defaultdict(list)
    for line, record in records:
        for span in _spans(record, f"{name} line {line}"):
            spans[span.trace].append(span)
    return [_tree(trace, found, block_tokens) for trace, found in spans.items()]


def _spans(record: Any, where: str) -> list[Span]:
    if not isinstance(record, dict) or not isinstance(record.get("resourceSpans"), list):
        raise field_error(where, "resourceSpans", "a list (an OTLP JSON export)", record)
    out = []
    for r, resource in enumerate(record["resourceSpans"]):
        scopes = resource.get("scopeSpans") if isinstance(resource, dict) else None
        if not isinstance(scopes, list):
            raise field_error(where, f"resourceSpans[{r}].scopeSpans", "a list", scopes)
        for s, scope in enumerate(scopes):
            items = scope.get("spans") if isinstance(scope, dict) else None
            at = f"resourceSpans[{r}].scopeSpans[{s}].spans"
            if not isinstance(items, list):
                raise field_error(where, at, "a list of spans", items)
            out += [_span(item, where, f"{at}[{i}]") for i, item in enumerate(items)]
    return out


def _span(item: Any, where: str, at: str) -> Span:
    if not isinstance(item, dict):
        raise field_error(where, at, "a span object", item)
    ids = [item.get(key) for key in ("traceId", "spanId")]
    for key, value in zip(("traceId", "spanId"), ids, strict=True):
        if not isinstance(value, str) or not value:
            raise field_error(where, f"{at}.{key}", "a non-empty string", value)
    trace, span = str(ids[0]), str(ids[1])
    start, end = (_nanos(item, key, where, at) for key in ("startTimeUnixNano", "endTimeUnixNano"))
    if end < start:
        raise field_error(where, f"{at}.endTimeUnixNano", f"at least the start ({start})", end)
    return Span(
        trace=trace,
        span=span,
        parent=str(item.get("parentSpanId") or ""),
        name=str(item.get("name", "")),
        start_ns=start,
        end_ns=end,
        attributes=_attributes(item.get("attributes", []), where, f"{at}.attributes"),
        where=f"{where}, span {span}",
    )


def _whole(value: Any) -> int:
    """An OTLP integer (JSON writes int64 as a string): the number, or -1."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return -1
    try:
        return int(value)
    except ValueError:
        return -1


def _nanos(item: dict[str, Any], key: str, where: str, at: str) -> int:
    value = item.get(key)
    nanos = _whole(value)
    if nanos < 0:
        raise field_error(where, f"{at}.{key}", "nanoseconds since the epoch (>= 0)", value)
    return nanos


def _attributes(items: Any, where: str, at: str) -> dict[str, Any]:
    if not isinstance(items, list):
        raise field_error(where, at, "a list of {key, value} attributes", items)
    out = {}
    for i, item in enumerate(items):
        value = item.get("value") if isinstance(item, dict) else None
        if not isinstance(value, dict) or not isinstance(item.get("key"), str):
            raise field_error(where, f"{at}[{i}]", "{key: ..., value: {stringValue: ...}}", item)
        out[item["key"]] = next((value[k] for k in VALUE_KEYS if k in value), None)
    return out


def _tokens(span: Span, key: str, least: int) -> int:
    value = span.attributes.get(key)
    tokens = _whole(value)
    if tokens < least:
        raise DatasetError(
            f"{span.where} ({span.name!r}), attribute {key!r}: expected an integer >= {least}, "
            f"got {quoted(value)}"
        )
    return within_limit(tokens, f"{span.where} ({span.name!r})", key)


def _tree(trace: str, spans: list[Span], block_tokens: int) -> AgentTree:
    by_id = _by_id(trace, spans)

    def owner(span: Span) -> str:
        """The span id of the nearest agent above ``span`` ("" for the trace);
        a span is never its own (its parent link may name itself)."""
        parent = by_id.get(span.parent)
        seen = {span.span}
        while parent is not None and parent.span not in seen:
            if parent.operation in AGENT_OPERATIONS:
                return parent.span
            seen.add(parent.span)
            parent = by_id.get(parent.parent)
        return ""

    members: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        if span.operation in (*AGENT_OPERATIONS, *CALL_OPERATIONS, TOOL_OPERATION):
            members[owner(span)].append(span)
    roots = members[""]
    if not any(s.operation in CALL_OPERATIONS for s in spans):
        raise DatasetError(
            f"{spans[0].where}: trace {trace} has no model call (a span with {OPERATION} "
            f"one of {', '.join(CALL_OPERATIONS)})"
        )
    fresh = itertools.count()
    if len(roots) == 1 and roots[0].operation in AGENT_OPERATIONS:
        root = _agent(roots[0].span, roots[0].name, members, block_tokens, fresh)
    else:
        root = _agent("", trace, members, block_tokens, fresh)
    return AgentTree(trace, spans[0].where, block_tokens, root)


def _by_id(trace: str, spans: list[Span]) -> dict[str, Span]:
    """Each span by its id; two spans of one trace with one id make its
    parent links ambiguous (and a span that is its parent's twin, a loop)."""
    by_id: dict[str, Span] = {}
    for span in spans:
        if span.span in by_id:
            raise DatasetError(f"{span.where}: trace {trace} has a second span with this id")
        by_id[span.span] = span
    return by_id


def _agent(
    span_id: str,
    name: str,
    members: dict[str, list[Span]],
    block_tokens: int,
    fresh: itertools.count,
    depth: int = 0,
) -> Agent:
    mine = sorted(members[span_id], key=lambda s: s.start_ns)
    tools = [s for s in mine if s.operation == TOOL_OPERATION]
    steps: list[AgentCall | Agent] = []
    before: AgentCall | None = None
    ended_ns: int | None = None
    for span in mine:
        if span.operation in AGENT_OPERATIONS:
            nesting(depth + 1, span.where, OPERATION)
            steps.append(
                _agent(span.span, span.name or span.span, members, block_tokens, fresh, depth + 1)
            )
        elif span.operation in CALL_OPERATIONS:
            tokens_in, tokens_out = _tokens(span, INPUT, 1), _tokens(span, OUTPUT, 0)
            context = before.input_tokens + before.output_tokens if before else 0
            gap = (span.start_ns - ended_ns) / NS if ended_ns is not None else 0.0
            tool = sum(
                max(min(t.end_ns, span.start_ns) - max(t.start_ns, ended_ns or 0), 0) for t in tools
            )
            before = AgentCall(
                input_tokens=tokens_in,
                output_tokens=tokens_out,
                blocks=derived_blocks(before, context, tokens_in, block_tokens, fresh),
                wait_s=max(gap, 0.0),
                tool_s=min(tool / NS, max(gap, 0.0)),
            )
            steps.append(before)
        else:
            continue
        ended_ns = max(ended_ns or 0, span.end_ns)
    return Agent(name, tuple(steps))
