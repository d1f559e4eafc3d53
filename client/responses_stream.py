"""The OpenAI Responses API (``POST /v1/responses``): request body and stream events.

Events are JSON objects named by ``type`` (the SSE ``event:`` field repeats it):
``response.output_text.delta`` (answer text), ``response.reasoning_text.delta``
(raw reasoning: vLLM, gpt-oss), ``response.reasoning_summary_text.delta``
(OpenAI's reasoning summaries), older vLLM's ``response.reasoning.delta``,
``response.refusal.delta``, ``response.function_call_arguments.delta`` and a
``function_call`` item's name (tool calls are answer output), then
``response.completed`` with ``usage`` (``input_tokens``, ``output_tokens``,
``output_tokens_details.reasoning_tokens``) or ``response.incomplete`` (a
token limit) ending the stream. ``error`` and ``response.failed`` fail the
request. No ``[DONE]`` follows; a stream that closes before the final event
is truncated. Every other event (created, in_progress, item and part
boundaries) carries no output.
"""

from __future__ import annotations

from typing import Any

from slogate.client.openai_stream import (
    Chunk,
    ChunkKind,
    error_message,
    event_object,
    malformed,
    usage_int,
)
from slogate.client.protocol import Protocol, bearer, chat_messages, common_options
from slogate.scenarios.model import PlannedTurn, RequestOptions

__all__ = ["RESPONSES", "parse_event", "responses_body"]

_ANSWER_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.function_call_arguments.delta",
    }
)
_REASONING_DELTAS = frozenset(
    {
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.reasoning.delta",
    }
)
_DONE = b"[DONE]"
_EMPTY = Chunk(ChunkKind.EMPTY)  # immutable in use: the interpreter only reads chunks


def _delta_text(obj: dict[str, Any]) -> str:
    delta = obj.get("delta")
    if type(delta) is str:
        return delta
    if type(delta) is dict:  # older vLLM: {"content": "..."}
        content = delta.get("content") or delta.get("text")
        return content if type(content) is str else ""
    return ""


def _index(obj: dict[str, Any]) -> int:
    index = obj.get("output_index")
    return index if type(index) is int else 0


def _final(obj: dict[str, Any], finish: str) -> Chunk:
    """``response.completed``/``response.incomplete``: the end, with usage."""
    response = obj.get("response")
    usage = response.get("usage") if type(response) is dict else None
    if type(response) is dict and finish != "stop":
        details = response.get("incomplete_details")
        reason = details.get("reason") if type(details) is dict else None
        finish = "length" if reason in (None, "max_output_tokens") else str(reason)
    if type(usage) is not dict:
        return Chunk(ChunkKind.DONE, finish_reason=finish)
    return Chunk(
        ChunkKind.DONE,
        finish_reason=finish,
        completion_tokens=usage_int(usage, "output_tokens"),
        prompt_tokens=usage_int(usage, "input_tokens"),
        reasoning_tokens=usage_int(usage, "reasoning_tokens", "output_tokens_details"),
        cached_tokens=usage_int(usage, "cached_tokens", "input_tokens_details"),
    )


def _failed(obj: dict[str, Any]) -> Chunk:
    response = obj.get("response")
    error = response.get("error") if type(response) is dict else None
    return Chunk(ChunkKind.ERROR, message=error_message(error or "response.failed"))


def parse_event(data: bytes | bytearray) -> Chunk:
    """Classify the data of one Responses API stream event."""
    if data == _DONE:
        return Chunk(ChunkKind.DONE)
    obj = event_object(data)
    if isinstance(obj, Chunk):
        return obj
    kind = obj.get("type")
    if type(kind) is not str:
        return malformed("stream event has no 'type'", data)
    if kind in _ANSWER_DELTAS:
        text = _delta_text(obj)
        if not text:
            return _EMPTY
        if kind == "response.function_call_arguments.delta":
            tools = [(_index(obj), "", "", text)]
            return Chunk(ChunkKind.OUTPUT, len(text), tools=tools)
        return Chunk(ChunkKind.OUTPUT, len(text), text)
    if kind in _REASONING_DELTAS:
        text = _delta_text(obj)
        return Chunk(ChunkKind.OUTPUT, len(text), reasoning=len(text)) if text else _EMPTY
    if kind == "response.output_item.added":
        item = obj.get("item")
        if type(item) is not dict or item.get("type") != "function_call":
            return Chunk(ChunkKind.EMPTY)
        name = item.get("name")
        if type(name) is not str or not name:
            return _EMPTY
        call_id = item.get("call_id") or item.get("id")
        tools = [(_index(obj), call_id if type(call_id) is str else "", name, "")]
        return Chunk(ChunkKind.OUTPUT, len(name), tools=tools)
    if kind == "response.completed":
        return _final(obj, "stop")
    if kind == "response.incomplete":
        return _final(obj, "length")
    if kind == "response.failed":
        return _failed(obj)
    if kind == "error":
        return Chunk(ChunkKind.ERROR, message=error_message(obj.get("error") or obj))
    return Chunk(ChunkKind.EMPTY)


def _input_part(part: dict[str, Any]) -> dict[str, Any]:
    """A chat content part as a Responses input part (``input_text``, ``input_image``)."""
    if part.get("type") == "image_url":
        return {"type": "input_image", "image_url": part["image_url"]["url"], "detail": "auto"}
    return {"type": "input_text", "text": part.get("text", "")}


def input_items(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat-shaped conversation the load side keeps, as Responses ``input``
    items: image parts become ``input_image``, an assistant's tool calls
    ``function_call`` items and tool results ``function_call_output`` items."""
    items: list[dict[str, Any]] = []
    for message in conversation:
        role, content = message.get("role"), message.get("content")
        if role == "tool":
            output = {"call_id": message["tool_call_id"], "output": content}
            items.append({"type": "function_call_output", **output})
            continue
        if type(content) is list:
            content = [_input_part(p) for p in content]
        if content:
            items.append({"role": role, "content": content})
        items.extend(
            {
                "type": "function_call",
                "call_id": call["id"],
                "name": call["function"]["name"],
                "arguments": call["function"]["arguments"],
            }
            for call in message.get("tool_calls") or ()
        )
    return items


def responses_body(
    model: str, turn: PlannedTurn, messages: list[dict[str, Any]] | None, options: RequestOptions
) -> dict[str, Any]:
    """A streamed Responses request: the conversation as ``input`` items
    (the system prompt stays a ``system`` message), ``max_output_tokens``."""
    body: dict[str, Any] = {
        "model": model,
        "stream": True,
        "max_output_tokens": turn.max_tokens,
        "input": input_items(chat_messages(turn) if messages is None else messages),
    }
    if options.tools:
        body["tools"] = [{"type": "function", **tool} for tool in options.tools]
    return common_options(body, turn, options)


RESPONSES = Protocol(
    "responses", "/v1/responses", responses_body, parse_event, bearer, id_holder="response"
)
