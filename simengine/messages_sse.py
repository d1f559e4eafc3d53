"""The Anthropic Messages API's stream events (``POST /v1/messages``), as
:class:`~slogate.simengine.sse.SseStream` writes them.

``message_start`` (with ``usage.input_tokens``), then per content block
``content_block_start``, ``content_block_delta`` events (``thinking_delta``
for a reasoning model's thinking block, ``text_delta`` for the answer) and
``content_block_stop``; at the end ``message_delta`` with ``stop_reason``
(``end_turn`` or ``max_tokens``) and ``usage.output_tokens``, then
``message_stop``. Errors inside the stream are ``event: error`` with
``{"type": "error", "error": {"type": "api_error", "message": ...}}``.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["MessagesEncoder"]

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}


def _event(kind: str, fields: dict[str, Any]) -> bytes:
    return (
        b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **fields}) + b"\n\n"
    )


class MessagesEncoder:
    """Encodes one message's events; stateful (which content block is open)."""

    __slots__ = ("_block", "_id", "_model", "_open", "_prompt_tokens")

    def __init__(self, *, request_id: str, model: str, prompt_tokens: int) -> None:
        self._id = request_id
        self._model = model
        self._prompt_tokens = prompt_tokens
        self._block = -1  # index of the open content block
        self._open: str | None = None  # its kind: "thinking" or "text"

    def opening(self) -> bytes:
        message = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self._prompt_tokens, "output_tokens": 1},
        }
        return _event("message_start", {"message": message})

    def _switch(self, kind: str) -> bytes:
        out = b""
        if self._open is not None:
            out += _event("content_block_stop", {"index": self._block})
        self._block += 1
        self._open = kind
        block = (
            {"type": "thinking", "thinking": ""}
            if kind == "thinking"
            else {"type": "text", "text": ""}
        )
        return out + _event("content_block_start", {"index": self._block, "content_block": block})

    def content(
        self,
        escaped_text: bytes,
        completion_tokens: int,
        finish_reason: str | None,
        reasoning: bool = False,
    ) -> bytes:
        kind = "thinking" if reasoning else "text"
        head = self._switch(kind) if self._open != kind else b""
        if not escaped_text:
            return head
        delta = b'"thinking_delta","thinking":"' if reasoning else b'"text_delta","text":"'
        return (
            head
            + b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
            % self._block
            + b'"delta":{"type":'
            + delta
            + escaped_text
            + b'"}}\n\n'
        )

    def closing(self, completion_tokens: int, finish_reason: str) -> bytes:
        stop = _event("content_block_stop", {"index": self._block}) if self._open else b""
        delta = {
            "delta": {
                "stop_reason": STOP_REASONS.get(finish_reason, finish_reason),
                "stop_sequence": None,
            },
            "usage": {"output_tokens": completion_tokens},
        }
        return stop + _event("message_delta", delta) + _event("message_stop", {})

    def error(self, message: str) -> bytes:
        return _event("error", {"error": {"type": "api_error", "message": message}})

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{\n\n'
