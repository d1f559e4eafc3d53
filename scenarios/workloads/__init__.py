"""Workload kinds: what each request of a scenario contains.

Each kind's module holds its field table (what a scenario file may write under
``workload:``), its validated spec, and the planner that turns the spec into
requests. ``read_workload`` picks the module by ``kind``.
"""

from __future__ import annotations

from typing import Any

from slogate.scenarios.datasets import DatasetReport
from slogate.scenarios.errors import quoted
from slogate.scenarios.schema import Reader, Shape, join, section_shape, tagged_shape
from slogate.scenarios.workloads import agent_trace, chat, code, conversations, embed, rag, trace
from slogate.scenarios.workloads.agent_trace import AgentTraceWorkload
from slogate.scenarios.workloads.chat import ChatWorkload
from slogate.scenarios.workloads.code import CodeWorkload
from slogate.scenarios.workloads.common import Context, SystemPrompt
from slogate.scenarios.workloads.conversations import ConversationsWorkload
from slogate.scenarios.workloads.embed import EmbedWorkload
from slogate.scenarios.workloads.rag import Documents, RagWorkload
from slogate.scenarios.workloads.trace import TraceWorkload

KINDS = {
    "chat": chat,
    "rag": rag,
    "code": code,
    "trace": trace,
    "conversations": conversations,
    "embed": embed,
    "agent-trace": agent_trace,
}
WORKLOAD_SHAPE: Shape = tagged_shape(
    "kind", {kind: section_shape(module.FIELDS) for kind, module in KINDS.items()}
)

Workload = (
    ChatWorkload
    | RagWorkload
    | CodeWorkload
    | TraceWorkload
    | ConversationsWorkload
    | EmbedWorkload
    | AgentTraceWorkload
)

__all__ = [
    "KINDS",
    "WORKLOAD_SHAPE",
    "AgentTraceWorkload",
    "ChatWorkload",
    "CodeWorkload",
    "Context",
    "ConversationsWorkload",
    "Documents",
    "EmbedWorkload",
    "RagWorkload",
    "SystemPrompt",
    "TraceWorkload",
    "Workload",
    "dataset_report",
    "read_workload",
]


def read_workload(reader: Reader, value: Any, path: str) -> Workload | None:
    """Validate a ``workload:`` mapping into the spec of its kind."""
    kind = value.get("kind") if isinstance(value, dict) else None
    if not isinstance(kind, str) or kind not in KINDS:
        where = join(path, "kind") if isinstance(value, dict) else path
        reader.problem(where, f"expected kind: one of {', '.join(KINDS)}, got {quoted(kind)}")
        return None
    module = KINDS[kind]
    f = reader.section(value, path, module.FIELDS)
    return None if f is None else module.build(reader, f, path)


def dataset_report(workload: Workload) -> DatasetReport | None:
    """What the workload's data file gave (trace and conversation kinds), else ``None``."""
    if isinstance(workload, (TraceWorkload, ConversationsWorkload, AgentTraceWorkload)):
        return workload.report
    return None
