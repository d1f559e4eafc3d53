"""The OpenAI Responses API's stream events (``POST /v1/responses``), as
:class:`~slogate.simengine.sse.SseStream` writes them.

Each event is ``event: <type>`` plus ``data: {"type": <type>, ...,
"sequence_number": n}``. Order: ``response.created``, ``response.in_progress``;
for a reasoning model a ``reasoning`` output item whose text streams as
``response.reasoning_text.delta`` (vLLM's shape); then a ``message`` item with
an ``output_text`` part streamed as ``response.output_text.delta``; at the end
the ``*.done`` events and ``response.completed`` (or ``response.incomplete``
when the token limit cut the answer) with ``usage``. An error inside the stream
is an ``error`` event. No ``[DONE]`` follows.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["ResponsesEncoder"]


class ResponsesEncoder:
    """Encodes one response's events; stateful (item boundaries, sequence numbers)."""

    __slots__ = (
        "_created",
        "_id",
        "_in_answer",
        "_in_reasoning",
        "_model",
        "_prompt_tokens",
        "_reasoning_tokens",
        "_seq",
    )

    def __init__(
        self,
        *,
        request_id: str,
        created: int,
        model: str,
        prompt_tokens: int,
        reasoning_tokens: int = 0,
    ) -> None:
        self._id = request_id
        self._created = created
        self._model = model
        self._prompt_tokens = prompt_tokens
        self._reasoning_tokens = reasoning_tokens
        self._seq = 0
        self._in_reasoning = False
        self._in_answer = False

    def _event(self, kind: str, fields: dict[str, Any]) -> bytes:
        data = orjson.dumps({"type": kind, **fields, "sequence_number": self._seq})
        self._seq += 1
        return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"

    def _response(self, status: str, usage: dict | None = None) -> dict[str, Any]:
        response: dict[str, Any] = {
            "id": self._id,
            "object": "response",
            "created_at": self._created,
            "model": self._model,
            "status": status,
            "output": [],
            "usage": usage,
        }
        if status == "incomplete":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        return response

    def opening(self) -> bytes:
        return self._event(
            "response.created", {"response": self._response("in_progress")}
        ) + self._event("response.in_progress", {"response": self._response("in_progress")})

    def _item(self, index: int, item_type: str) -> bytes:
        item = {"id": f"{item_type[:3]}_{self._id}", "type": item_type, "status": "in_progress"}
        if item_type == "message":
            item.update(role="assistant", content=[])
        added = self._event("response.output_item.added", {"output_index": index, "item": item})
        part_type = "output_text" if item_type == "message" else "reasoning_text"
        part = {"type": part_type, "text": ""}
        return added + self._event(
            "response.content_part.added",
            {"item_id": item["id"], "output_index": index, "content_index": 0, "part": part},
        )

    def _close_reasoning(self) -> bytes:
        self._in_reasoning = False
        item = {"id": f"rea_{self._id}", "type": "reasoning", "status": "completed"}
        return self._event("response.output_item.done", {"output_index": 0, "item": item})

    def content(
        self,
        escaped_text: bytes,
        completion_tokens: int,
        finish_reason: str | None,
        reasoning: bool = False,
    ) -> bytes:
        """A text delta; the items open and close around it as the output moves
        from reasoning to the answer."""
        head = b""
        if reasoning and not self._in_reasoning:
            self._in_reasoning = True
            head = self._item(0, "reasoning")
        if not reasoning and not self._in_answer:
            if self._in_reasoning:
                head += self._close_reasoning()
            self._in_answer = True
            head += self._item(1 if self._reasoning_tokens else 0, "message")
        if not escaped_text:
            return head
        kind = "response.reasoning_text.delta" if reasoning else "response.output_text.delta"
        index = 1 if self._reasoning_tokens and not reasoning else 0
        prefix = b'{"type":"%s","item_id":"%s_%s","output_index":%d,"content_index":0,"delta":"' % (
            kind.encode(),
            b"rea" if reasoning else b"mes",
            self._id.encode(),
            index,
        )
        data = prefix + escaped_text + b'","sequence_number":%d}' % self._seq
        self._seq += 1
        return head + b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"

    def closing(self, completion_tokens: int, finish_reason: str) -> bytes:
        """``response.output_text.done`` and friends, then the final event with usage."""
        index = 1 if self._reasoning_tokens else 0
        item_id = f"mes_{self._id}"
        tail = self._event(
            "response.output_item.done",
            {"output_index": index, "item": {"id": item_id, "type": "message"}},
        )
        usage = {
            "input_tokens": self._prompt_tokens,
            "output_tokens": completion_tokens,
            "total_tokens": self._prompt_tokens + completion_tokens,
            "output_tokens_details": {
                "reasoning_tokens": min(self._reasoning_tokens, completion_tokens)
            },
        }
        status = "completed" if finish_reason == "stop" else "incomplete"
        return tail + self._event(f"response.{status}", {"response": self._response(status, usage)})

    def error(self, message: str) -> bytes:
        return self._event("error", {"code": "server_error", "message": message, "param": None})

    def malformed(self) -> bytes:
        kind = b"response.output_text.delta"
        return b'event: %s\ndata: {"type":"%s","delta":"\n\n' % (kind, kind)
