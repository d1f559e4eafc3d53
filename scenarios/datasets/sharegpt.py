"""ShareGPT dumps: ``{"conversations": [{"from": "human", "value": "..."}, ...]}``
per conversation, as a JSON list or one per line (JSONL). Speakers are
``human``/``gpt``/``system``; dumps scraped from several products also use
``user``, ``assistant``, ``chatgpt``, ``bard`` and ``bing``."""

from __future__ import annotations

from typing import Any

from slogate.scenarios.datasets.table import DatasetError, Skip

KEY = "conversations"
ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "system": "system",
}


def messages(record: dict[str, Any], where: str) -> list[tuple[str, str]]:
    """``(role, text)`` of each message; ``where`` is ``file line N``.
    Raises ``DatasetError`` for a malformed record, ``Skip`` for an unknown speaker."""
    items = record.get(KEY)
    if not isinstance(items, list):
        raise DatasetError(f"{where}, field {KEY!r}: expected a list of messages, got {items!r}")
    out = []
    for i, item in enumerate(items):
        field = f"{KEY}[{i}]"
        if not isinstance(item, dict):
            raise DatasetError(
                f"{where}, field {field!r}: expected an object with from and value, got {item!r}"
            )
        speaker, value = item.get("from"), item.get("value")
        if not isinstance(speaker, str):
            raise DatasetError(f"{where}, field '{field}.from': expected a string, got {speaker!r}")
        if not isinstance(value, str):
            raise DatasetError(f"{where}, field '{field}.value': expected a string, got {value!r}")
        role = ROLES.get(speaker.lower())
        if role is None:
            raise Skip(f"unknown speaker {speaker!r}")
        out.append((role, value))
    return out
