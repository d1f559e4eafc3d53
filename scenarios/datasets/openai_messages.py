"""OpenAI chat logs: JSONL of ``{"messages": [{"role": ..., "content": ...}]}``,
as fine-tuning files and request logs store them. Content is a string or a
list of parts; text parts are joined. Conversations with tool calls or
non-text parts are skipped: their replies cannot be replayed as text."""

from __future__ import annotations

from typing import Any

from slogate.scenarios.datasets.table import DatasetError, Skip, message_objects, string_field
from slogate.scenarios.errors import quoted

KEY = "messages"
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
TOOL_ROLES = ("tool", "function")


def messages(record: dict[str, Any], where: str) -> list[tuple[str, str]]:
    """``(role, text)`` of each message; ``where`` is ``file line N``.
    Raises ``DatasetError`` for a malformed record, ``Skip`` for one that
    cannot be replayed (tools, images, unknown roles)."""
    out = []
    for field, item in message_objects(record, KEY, where, "role and content"):
        role = string_field(item, "role", where, field)
        if role in TOOL_ROLES or item.get("tool_calls") or item.get("function_call"):
            raise Skip("tool calls")
        if role not in ROLES:
            raise Skip(f"unknown role {role!r}")
        out.append((ROLES[role], _text(item.get("content"), where, f"{field}.content")))
    return out


def _text(content: Any, where: str, field: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise DatasetError(
            f"{where}, field {field!r}: expected a string or a list of parts, got {quoted(content)}"
        )
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text":
            raise Skip(f"non-text content ({kind or 'not a part'})")
        if not isinstance(part.get("text"), str):
            raise DatasetError(f"{where}, field '{field}': a text part without a text string")
        texts.append(part["text"])
    return "\n".join(texts)
