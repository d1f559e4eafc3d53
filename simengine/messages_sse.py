"""The Anthropic Messages API's stream events (``POST /v1/messages``), as
:class:`~slogate.simengine.chat_sse.SseStream` writes them.

``message_start`` (with ``usage.input_tokens``), then per content block
``content_block_start``, ``content_block_delta`` events (``thinking_delta``
for a reasoning model's thinking block, ``text_delta`` for the answer, or
``input_json_delta`` for a ``tool_use`` block when the reply is an agent's
tool call) and ``content_block_stop``; at the end ``message_delta`` with
``stop_reason`` (``end_turn``, ``max_tokens`` or ``tool_use``) and
``usage.output_tokens``, then
``message_stop``. Errors inside the stream are ``event: error`` with
``{"type": "error", "error": {"type": "api_error", "message": ...}}``.
"""

from __future__ import annotations

from typing import Any

import orjson

from slogate.simengine.chat_sse import tool_arguments
from slogate.simengine.scheduler import Sequence

__all__ = ["MessagesEncoder"]

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}
_DELTA_FIELDS = {  # a content block's delta type and field, before the escaped text
    "thinking": b'"thinking_delta","thinking":"',
    "text": b'"text_delta","text":"',
    "tool_use": b'"input_json_delta","partial_json":"',
}


def _event(kind: str, fields: dict[str, Any]) -> bytes:
    return (
        b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **fields}) + b"\n\n"
    )


def cache_usage(prompt_tokens: int, cached_tokens: int) -> dict[str, int]:
    """Anthropic's ``message_start`` usage: ``input_tokens`` counts only the
    prompt tokens not read from the cache (``cache_read_input_tokens``);
    ``output_tokens`` is a placeholder."""
    return {
        "input_tokens": prompt_tokens - cached_tokens,
        "cache_read_input_tokens": cached_tokens,
        "output_tokens": 1,
    }


class MessagesEncoder:
    """Encodes one message's events; stateful (which content block is open)."""

    __slots__ = ("_block", "_id", "_model", "_open", "_seq", "_tool", "_tool_started")

    def __init__(
        self,
        *,
        request_id: str,
        model: str,
        seq: Sequence,
        tool: tuple[str, str] | None = None,
    ) -> None:
        self._id = request_id
        self._tool = tool  # (call id, function name): the answer is this tool call
        self._tool_started = False
        self._model = model
        self._seq = seq  # its prompt length, and its cached tokens once admitted
        self._block = -1  # index of the open content block
        self._open: str | None = None  # its kind: "thinking", "text" or "tool_use"

    def opening(self) -> bytes:
        """``message_start``: written with the first token, after admission,
        so the prefix cache's share of the prompt is known."""
        message: dict[str, object] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "model": self._model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": cache_usage(self._seq.prompt_len, self._seq.num_cached_tokens or 0),
        }
        return _event("message_start", {"message": message})

    def _switch(self, kind: str) -> bytes:
        out = b""
        if self._open is not None:
            out += _event("content_block_stop", {"index": self._block})
        self._block += 1
        self._open = kind
        block: dict[str, Any] = {"type": kind, kind: ""}
        if kind == "tool_use":
            assert self._tool is not None
            call_id, name = self._tool
            block = {"type": kind, "id": call_id, "name": name, "input": {}}
        return out + _event("content_block_start", {"index": self._block, "content_block": block})

    def content(
        self,
        escaped_text: bytes,
        completion_tokens: int,
        finish_reason: str | None,
        reasoning: bool = False,
    ) -> bytes:
        kind = "thinking" if reasoning else "text" if self._tool is None else "tool_use"
        head = self._switch(kind) if self._open != kind else b""
        if kind == "tool_use":
            first, self._tool_started = not self._tool_started, True
            escaped_text = tool_arguments(escaped_text, first, finish_reason is not None)
        if not escaped_text:
            return head
        delta = _DELTA_FIELDS[kind]
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
                "stop_reason": "tool_use"
                if self._tool is not None  # a complete call, as chat's "tool_calls"
                else STOP_REASONS.get(finish_reason, finish_reason),
                "stop_sequence": None,
            },
            "usage": {"output_tokens": completion_tokens},
        }
        return stop + _event("message_delta", delta) + _event("message_stop", {})

    def error(self, message: str) -> bytes:
        return _event("error", {"error": {"type": "api_error", "message": message}})

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","delta":{\n\n'
