"""ShareGPT dumps: ``{"conversations": [{"from": "human", "value": "..."}, ...]}``
per conversation, as a JSON list or one per line (JSONL). Speakers are
``human``/``gpt``/``system``; dumps scraped from several products also use
``user``, ``assistant``, ``chatgpt``, ``bard`` and ``bing``."""

from __future__ import annotations

from typing import Any

from slogate.scenarios.datasets.table import Skip, message_objects, string_field

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
    out = []
    for field, item in message_objects(record, KEY, where, "from and value"):
        speaker = string_field(item, "from", where, field)
        value = string_field(item, "value", where, field)
        role = ROLES.get(speaker.lower())
        if role is None:
            raise Skip(f"unknown speaker {speaker!r}")
        out.append((role, value))
    return out
