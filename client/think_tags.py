"""Reasoning inside the content: ``<think>...</think>`` from a server without a
reasoning parser.

A reasoning model served without a parser (vLLM or SGLang without
``--reasoning-parser``, llama.cpp with ``--reasoning-format none``) streams its
thinking as ordinary content between tags. :class:`ThinkTags` splits each
content piece into reasoning and answer as it arrives. Tags may be split across
chunks (a chunk ending in ``</thi``), so a possible partial tag is held back
until the next piece decides it. The thinking block is the first thing a
reasoning model writes: content that starts with anything else carries no tags,
and the splitter settles after one check. Chat templates that open the block
themselves (DeepSeek-R1's adds ``<think>\\n`` to the prompt) stream only the
closing tag: ``starts_inside`` covers them.

Pure: no I/O. Tags count as reasoning characters (they are reasoning tokens).
Whitespace before the opening tag counts as answer: it cannot be told apart
until the tag arrives.
"""

from __future__ import annotations

__all__ = ["DEFAULT_TAGS", "ThinkTags"]

DEFAULT_TAGS = ("<think>", "</think>")

_START, _INSIDE, _AFTER = 0, 1, 2


class ThinkTags:
    """Splits one stream's content into reasoning and answer. ``settled`` turns
    True once no more tags can come (the block closed, or the content did not
    start with one); the caller may then drop the splitter."""

    __slots__ = ("_close", "_open", "_pending", "_state", "settled")

    def __init__(
        self,
        open_tag: str = DEFAULT_TAGS[0],
        close_tag: str = DEFAULT_TAGS[1],
        *,
        starts_inside: bool = False,
    ) -> None:
        if not open_tag or not close_tag:
            raise ValueError("think tags must not be empty")
        self._open = open_tag
        self._close = close_tag
        self._state = _INSIDE if starts_inside else _START
        self._pending = ""
        self.settled = False

    def split(self, text: str) -> tuple[int, str]:
        """(reasoning characters of ``text``, the answer text it completes). The
        answer may include a held-back piece of an earlier chunk that turned out
        not to be a tag."""
        if self._state == _START:
            return self._start(text)
        if self._state == _INSIDE:
            return self._inside(text)
        return 0, text

    def _start(self, text: str) -> tuple[int, str]:
        buffer = self._pending + text
        body = buffer.lstrip()
        if not body:  # whitespace so far: answer, and still undecided
            return 0, text
        if body.startswith(self._open):
            self._state = _INSIDE
            skipped = len(buffer) - len(body) + len(self._open)
            self._pending = ""
            _, answer = self._inside(buffer[skipped:])
            return len(text) - len(answer), answer
        if self._open.startswith(body):  # a partial opening tag: undecided
            self._pending = buffer
            return len(text), ""
        self.settled = True
        self._pending = ""
        return 0, buffer

    def _inside(self, text: str) -> tuple[int, str]:
        held = len(self._pending)
        buffer = self._pending + text
        at = buffer.find(self._close)
        if at >= 0:
            end = at + len(self._close)
            self._pending = ""
            self._state = _AFTER
            self.settled = True
            return end - held, buffer[end:]
        self._pending = _partial_suffix(buffer, self._close)
        return len(text), ""


def _partial_suffix(text: str, tag: str) -> str:
    """The longest end of ``text`` that is a beginning of ``tag`` (a tag cut in two)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return text[-size:]
    return ""
