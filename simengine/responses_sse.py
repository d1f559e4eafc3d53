"""The OpenAI Responses API's stream events (``POST /v1/responses``), as
:class:`~slogate.simengine.chat_sse.SseStream` writes them.

Each event is ``event: <type>`` plus ``data: {"type": <type>, ...,
"sequence_number": n}``. Order: ``response.created``, ``response.in_progress``;
for a reasoning model a ``reasoning`` output item whose text streams as
``response.reasoning_text.delta`` (vLLM's shape); then a ``message`` item with
an ``output_text`` part streamed as ``response.output_text.delta``, or, when
the reply is an agent's tool call, a ``function_call`` item whose arguments
stream as ``response.function_call_arguments.delta``; at the end
the ``*.done`` events and ``response.completed`` (or ``response.incomplete``
when the token limit cut the answer) with ``usage``. An error inside the stream
is an ``error`` event. No ``[DONE]`` follows.
"""

from __future__ import annotations

from typing import Any

import orjson

from slogate.simengine.chat_sse import tool_arguments
from slogate.simengine.scheduler import Sequence

__all__ = ["ResponsesEncoder"]


class ResponsesEncoder:
    """Encodes one response's events; stateful (item boundaries, sequence numbers)."""

    __slots__ = (
        "_created",
        "_id",
        "_in_answer",
        "_in_reasoning",
        "_model",
        "_reasoning_tokens",
        "_seq",
        "_sequence",
        "_tool",
        "_tool_args",
    )

    def __init__(
        self,
        *,
        request_id: str,
        created: int,
        model: str,
        sequence: Sequence,
        reasoning_tokens: int = 0,
        tool: tuple[str, str] | None = None,
    ) -> None:
        self._id = request_id
        self._tool = tool  # (call id, function name): the answer is this tool call
        self._tool_args: list[bytes] = []
        self._created = created
        self._model = model
        self._sequence = sequence  # its prompt length, and its cached tokens once admitted
        self._reasoning_tokens = reasoning_tokens
        self._seq = 0  # the events' sequence_number
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
        item: dict[str, object] = {
            "id": f"{item_type[:3]}_{self._id}",
            "type": item_type,
            "status": "in_progress",
        }
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
            index = 1 if self._reasoning_tokens else 0
            head += self._tool_item(index) if self._tool else self._item(index, "message")
        if self._tool is not None and not reasoning:
            return head + self._tool_delta(escaped_text, finish_reason is not None)
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

    def _tool_item(self, index: int) -> bytes:
        return self._event(
            "response.output_item.added", {"output_index": index, "item": self._call("")}
        )

    def _call(self, arguments: str) -> dict[str, Any]:
        assert self._tool is not None
        call_id, name = self._tool
        status = "completed" if arguments else "in_progress"
        return {
            "id": f"fc_{self._id}",
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": status,
        }

    def _tool_delta(self, escaped_text: bytes, last: bool) -> bytes:
        """A piece of the tool call's arguments (JSON text inside a JSON string)."""
        arguments = tool_arguments(escaped_text, not self._tool_args, last)
        if not arguments:
            return b""
        self._tool_args.append(arguments)
        kind = b"response.function_call_arguments.delta"
        data = b'{"type":"%s","item_id":"fc_%s","output_index":%d,"delta":"%s",' % (
            kind,
            self._id.encode(),
            1 if self._reasoning_tokens else 0,
            arguments,
        )
        data += b'"sequence_number":%d}' % self._seq
        self._seq += 1
        return b"event: " + kind + b"\ndata: " + data + b"\n\n"

    def closing(self, completion_tokens: int, finish_reason: str) -> bytes:
        """``response.output_text.done`` and friends, then the final event with usage."""
        index = 1 if self._reasoning_tokens else 0
        if self._tool is None:
            item = {"id": f"mes_{self._id}", "type": "message"}
            tail = b""
        else:
            arguments = orjson.loads(b'"' + b"".join(self._tool_args) + b'"')
            item = self._call(arguments)
            done = {"item_id": item["id"], "output_index": index, "arguments": arguments}
            tail = self._event("response.function_call_arguments.done", done)
        tail += self._event("response.output_item.done", {"output_index": index, "item": item})
        prompt = self._sequence.prompt_len
        usage = {
            "input_tokens": prompt,
            "output_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
            "input_tokens_details": {"cached_tokens": self._sequence.num_cached_tokens or 0},
            "output_tokens_details": {
                "reasoning_tokens": min(self._reasoning_tokens, completion_tokens)
            },
        }
        # a tool call's arguments are always complete, as chat's "tool_calls"
        status = "completed" if finish_reason == "stop" or self._tool else "incomplete"
        return tail + self._event(f"response.{status}", {"response": self._response(status, usage)})

    def error(self, message: str) -> bytes:
        return self._event("error", {"code": "server_error", "message": message, "param": None})

    def malformed(self) -> bytes:
        kind = b"response.output_text.delta"
        return b'event: %s\ndata: {"type":"%s","delta":"\n\n' % (kind, kind)
