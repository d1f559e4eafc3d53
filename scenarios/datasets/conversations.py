"""Recorded conversations as sessions to replay: read a ShareGPT or OpenAI
messages file, keep the conversations that can be replayed turn by turn,
count their tokens and apply the scenario's filters.

A conversation is an optional system message, then user and assistant
messages in turn. One that breaks that shape is skipped with the reason (a
dump is rarely clean: starting with the assistant, two user messages in a
row); a malformed record stops loading, naming the file, line and field.
A final user message without a reply is dropped: it has no recorded reply
to measure against.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slogate.scenarios.datasets import openai_messages, sharegpt
from slogate.scenarios.datasets.report import DatasetReport, Lengths
from slogate.scenarios.datasets.table import DatasetError, Skip, json_lines

FORMATS = ("auto", "sharegpt", "openai")
READERS = {"sharegpt": sharegpt, "openai": openai_messages}
_BETWEEN = re.compile(r"\s*")

BatchCounter = Callable[[Sequence[str]], list[int]]


@dataclass(frozen=True, slots=True)
class Turn:
    """A user message and the assistant's recorded reply, with token counts."""

    user: str
    reply: str
    user_tokens: int
    reply_tokens: int


@dataclass(frozen=True, slots=True)
class Recorded:
    """One conversation of the file, starting on ``line``."""

    line: int
    system: str | None
    system_tokens: int
    turns: tuple[Turn, ...]

    @property
    def tokens(self) -> int:
        return self.system_tokens + sum(t.user_tokens + t.reply_tokens for t in self.turns)

    def contexts(self) -> list[int]:
        """Each turn's input with the recorded history: system, earlier turns, its message."""
        out, history = [], self.system_tokens
        for turn in self.turns:
            out.append(history + turn.user_tokens)
            history += turn.user_tokens + turn.reply_tokens
        return out


@dataclass(frozen=True, slots=True)
class Filters:
    """Which conversations to keep: bounds on answered turns and on all their tokens."""

    min_turns: int = 1
    max_turns: int | None = None
    min_tokens: int | None = None
    max_tokens: int | None = None

    def reason(self, conversation: Recorded) -> str | None:
        """Why ``conversation`` is filtered out, or ``None`` to keep it."""
        turns, tokens = len(conversation.turns), conversation.tokens
        if turns < self.min_turns:
            return f"fewer than min_turns ({self.min_turns}) turns"
        if self.max_turns is not None and turns > self.max_turns:
            return f"more than max_turns ({self.max_turns}) turns"
        if self.min_tokens is not None and tokens < self.min_tokens:
            return f"fewer than min_tokens ({self.min_tokens}) tokens"
        if self.max_tokens is not None and tokens > self.max_tokens:
            return f"more than max_tokens ({self.max_tokens}) tokens"
        return None


@dataclass(frozen=True, slots=True, eq=False)
class ConversationSet:
    source: str
    conversations: tuple[Recorded, ...]
    report: DatasetReport


def load_conversations(
    path: Path, fmt: str, filters: Filters, count: BatchCounter
) -> ConversationSet:
    """The conversations of ``path`` that pass ``filters``; ``count`` gives the
    token counts of a batch of texts. Raises ``DatasetError`` for a malformed
    file, or when no conversation is left."""
    skipped: Counter[str] = Counter()
    shaped, dropped = [], 0
    records = records_of(path)
    for line, record in records:
        where = f"{path.name} line {line}"
        try:
            system, pairs, unanswered = _shape(_messages(record, fmt, where))
        except Skip as skip:
            skipped[str(skip)] += 1
            continue
        dropped += unanswered
        shaped.append((line, system, pairs))
    counted = _count(shaped, count)
    kept = []
    for conversation in counted:
        reason = filters.reason(conversation)
        if reason is None:
            kept.append(conversation)
        else:
            skipped[reason] += 1
    if not kept:
        why = "; ".join(f"{n} {reason}" for reason, n in skipped.most_common()) or "it is empty"
        raise DatasetError(f"{path.name}: no conversation left to replay ({why})")
    notes = (f"final user messages without a reply, dropped: {dropped}",) if dropped else ()
    report = DatasetReport(
        path.name, "conversations", len(records), dict(skipped), _lengths(kept), notes
    )
    return ConversationSet(str(path), tuple(kept), report)


def records_of(path: Path) -> list[tuple[int, Any]]:
    """``(line, record)`` pairs: of a JSON list (a ShareGPT dump) or of JSONL."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc
    if text.lstrip().startswith("["):
        return _json_list(path.name, text)
    return json_lines(path)


def _after_space(text: str, pos: int) -> int:
    """Where the whitespace from ``pos`` on ends (``_BETWEEN`` matches anywhere)."""
    space = _BETWEEN.match(text, pos)
    return pos if space is None else space.end()


def _json_list(name: str, text: str) -> list[tuple[int, Any]]:
    """The items of a JSON list, each with the line it starts on (lines are
    counted as the reading moves on, once per character)."""
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    line, counted = 1, 0
    out: list[tuple[int, Any]] = []

    def line_at(at: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, at)
        counted = at
        return line

    while True:
        pos = _after_space(text, pos)
        if text.startswith("]", pos):
            return out
        if out:
            if not text.startswith(",", pos):
                raise DatasetError(f"{name} line {line_at(pos)}: not JSON (expected ',' or ']')")
            pos = _after_space(text, pos + 1)
        try:
            item, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{name} line {exc.lineno}: not JSON ({exc.msg})") from exc
        out.append((line_at(pos), item))
        pos = end


def _messages(record: Any, fmt: str, where: str) -> list[tuple[str, str]]:
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(record).__name__}")
    if fmt == "auto":
        fmt = next((name for name, r in READERS.items() if r.KEY in record), "")
        if not fmt:
            keys = ", ".join(r.KEY for r in READERS.values())
            raise DatasetError(f"{where}: expected a field among {keys}; found {list(record)}")
    return READERS[fmt].messages(record, where)


def _shape(messages: list[tuple[str, str]]) -> tuple[str | None, list[tuple[str, str]], int]:
    """(system text, (user, reply) pairs, 1 if a final unanswered user message
    was dropped); raises ``Skip`` for a conversation that cannot be replayed."""
    system = None
    if messages and messages[0][0] == "system":
        system = messages[0][1] or None
        messages = messages[1:]
    if any(role == "system" for role, _ in messages):
        raise Skip("a system message after the first message")
    if not messages:
        raise Skip("no user message")
    if messages[0][0] != "user":
        raise Skip("starts with an assistant message")
    for i in range(1, len(messages)):
        if messages[i][0] == messages[i - 1][0]:
            raise Skip(f"two {messages[i][0]} messages in a row")
    unanswered = len(messages) % 2
    messages = messages[: len(messages) - unanswered]
    if not messages:
        raise Skip("no answered user message")
    if any(not text.strip() for _, text in messages):
        raise Skip("an empty message")
    pairs = [(messages[i][1], messages[i + 1][1]) for i in range(0, len(messages), 2)]
    return system, pairs, unanswered


def _count(
    shaped: list[tuple[int, str | None, list[tuple[str, str]]]], count: BatchCounter
) -> list[Recorded]:
    """Token counts of every text, in one batch call."""
    texts = [
        text
        for _, system, pairs in shaped
        for text in [system or "", *(t for pair in pairs for t in pair)]
    ]
    counts = iter(count(texts))
    out = []
    for line, system, pairs in shaped:
        system_tokens = next(counts)
        turns = tuple(Turn(user, reply, next(counts), next(counts)) for user, reply in pairs)
        out.append(Recorded(line, system, system_tokens if system else 0, turns))
    return out


def _lengths(conversations: list[Recorded]) -> tuple[Lengths, ...]:
    import numpy as np

    contexts = [c for conv in conversations for c in conv.contexts()]
    replies = [t.reply_tokens for conv in conversations for t in conv.turns]
    return (
        Lengths.of("turns", np.array([len(c.turns) for c in conversations])),
        Lengths.of("input tokens", np.array(contexts)),
        Lengths.of("output tokens", np.array(replies)),
    )
