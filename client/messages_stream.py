"""The Anthropic Messages API (``POST /v1/messages``): request body and stream events.

Events (``type`` in the JSON, repeated by the SSE ``event:`` field):
``message_start`` (the message, with ``usage.input_tokens`` and cache
tokens), ``content_block_start`` (a ``text``, ``thinking`` or ``tool_use``
block; a tool's name is its first output), ``content_block_delta`` with
``text_delta`` (answer), ``thinking_delta`` (reasoning), ``input_json_delta``
(tool arguments, answer output) or ``signature_delta`` (no output),
``content_block_stop``, ``message_delta`` (``stop_reason`` and the cumulative
``usage.output_tokens``), ``message_stop`` (the end), ``ping`` keep-alives,
and ``error`` (``{"type": "error", "error": {"type", "message"}}``), which
fails the request. The key goes in ``x-api-key`` with an
``anthropic-version`` header (llama.cpp's ``/v1/messages`` accepts both).
"""

from __future__ import annotations

from typing import Any

import orjson

from slogate.client.openai_stream import (
    Chunk,
    ChunkKind,
    error_message,
    event_object,
    malformed,
    usage_int,
)
from slogate.client.protocol import Protocol, chat_messages, common_options
from slogate.scenarios.model import PlannedTurn, RequestOptions

__all__ = ["ANTHROPIC_VERSION", "MESSAGES", "messages_body", "parse_event"]

ANTHROPIC_VERSION = "2023-06-01"
_CACHE_KEYS = ("cache_creation_input_tokens", "cache_read_input_tokens")


def _start(obj: dict[str, Any]) -> Chunk:
    """``message_start``: the prompt's tokens (cached ones included: Anthropic's
    ``input_tokens`` counts only those after the last cache breakpoint), of
    which ``cache_read_input_tokens`` came from the cache. Its
    ``output_tokens`` is a placeholder; ``message_delta`` sends the count."""
    message = obj.get("message")
    usage = message.get("usage") if type(message) is dict else None
    if type(usage) is not dict:
        return Chunk(ChunkKind.EMPTY)
    prompt = usage_int(usage, "input_tokens")
    if prompt is not None:
        prompt += sum(usage_int(usage, key) or 0 for key in _CACHE_KEYS)
    cached = usage_int(usage, "cache_read_input_tokens")
    return Chunk(ChunkKind.EMPTY, prompt_tokens=prompt, cached_tokens=cached)


def _index(obj: dict[str, Any]) -> int:
    index = obj.get("index")
    return index if type(index) is int else 0


def _text(text: Any) -> Chunk:
    """Answer text, from a ``text`` block's start or a ``text_delta``."""
    return Chunk(ChunkKind.OUTPUT, len(text), text) if type(text) is str and text else _empty()


def _thinking(text: Any) -> Chunk:
    """Reasoning, from a ``thinking`` block's start or a ``thinking_delta``."""
    if type(text) is str and text:
        return Chunk(ChunkKind.OUTPUT, len(text), reasoning=len(text))
    return _empty()


def _block_start(obj: dict[str, Any]) -> Chunk:
    block = obj.get("content_block")
    if type(block) is not dict:
        return Chunk(ChunkKind.EMPTY)
    kind = block.get("type")
    if kind == "tool_use":
        name = block.get("name")
        if type(name) is not str or not name:
            return _empty()
        call_id = block.get("id")
        tools = [(_index(obj), call_id if type(call_id) is str else "", name, "")]
        return Chunk(ChunkKind.OUTPUT, len(name), tools=tools)
    if kind == "text":
        return _text(block.get("text"))
    if kind == "thinking":
        return _thinking(block.get("thinking"))
    return _empty()


def _block_delta(obj: dict[str, Any], data: bytes | bytearray) -> Chunk:
    delta = obj.get("delta")
    if type(delta) is not dict:
        return malformed("content_block_delta without a delta object", data)
    kind = delta.get("type")
    if kind == "text_delta":
        return _text(delta.get("text"))
    if kind == "thinking_delta":
        return _thinking(delta.get("thinking"))
    if kind == "input_json_delta":
        text = delta.get("partial_json")
        if type(text) is not str or not text:
            return _empty()
        return Chunk(ChunkKind.OUTPUT, len(text), tools=[(_index(obj), "", "", text)])
    return _empty()


def _message_delta(obj: dict[str, Any]) -> Chunk:
    delta = obj.get("delta")
    reason = delta.get("stop_reason") if type(delta) is dict else None
    usage = obj.get("usage")
    completion = usage_int(usage, "output_tokens") if type(usage) is dict else None
    finish = reason if type(reason) is str else None
    return Chunk(ChunkKind.EMPTY, finish_reason=finish, completion_tokens=completion)


def _empty() -> Chunk:
    return Chunk(ChunkKind.EMPTY)


def parse_event(data: bytes | bytearray) -> Chunk:
    """Classify the data of one Messages API stream event."""
    obj = event_object(data)
    if isinstance(obj, Chunk):
        return obj
    kind = obj.get("type")
    if kind == "content_block_delta":
        return _block_delta(obj, data)
    if kind == "content_block_start":
        return _block_start(obj)
    if kind == "message_delta":
        return _message_delta(obj)
    if kind == "message_start":
        return _start(obj)
    if kind == "message_stop":
        return Chunk(ChunkKind.DONE)
    if kind == "error":
        return Chunk(ChunkKind.ERROR, message=error_message(obj.get("error") or obj))
    if type(kind) is not str:
        return malformed("stream event has no 'type'", data)
    return _empty()  # ping, content_block_stop, and events added later


def _block(part: dict[str, Any]) -> dict[str, Any]:
    """A chat content part as a Messages content block: text, or an image
    whose ``data:`` URL becomes a base64 source (another URL a ``url`` source)."""
    if part.get("type") != "image_url":
        return {"type": "text", "text": part.get("text", "")}
    url = part["image_url"]["url"]
    header, base64, data = url.partition(";base64,")
    if not (base64 and header.startswith("data:")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    source = {"type": "base64", "media_type": header.removeprefix("data:"), "data": data}
    return {"type": "image", "source": source}


def _tool_input(arguments: str) -> Any:
    """A tool call's arguments as the ``input`` object Anthropic wants back."""
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return {"arguments": arguments}
    return value if type(value) is dict else {"arguments": arguments}


def anthropic_turns(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat-shaped conversation the load side keeps (system prompts
    removed), as Messages turns: image parts become ``image`` blocks, an
    assistant's tool calls ``tool_use`` blocks, and the tool results that
    follow them one user turn of ``tool_result`` blocks."""
    turns: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the open user turn of tool results
    for message in conversation:
        role, content = message.get("role"), message.get("content")
        if role == "tool":
            if results is None:
                results = []
                turns.append({"role": "user", "content": results})
            result = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
            results.append({**result, "content": content})
            continue
        results = None
        calls = message.get("tool_calls") or ()
        if type(content) is list:
            content = [_block(p) for p in content]
        elif calls:
            content = [{"type": "text", "text": content}] if content else []
            content.extend(
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "input": _tool_input(call["function"]["arguments"]),
                }
                for call in calls
            )
        turns.append({"role": role, "content": content})
    return turns


def messages_body(
    model: str, turn: PlannedTurn, messages: list[dict[str, Any]] | None, options: RequestOptions
) -> dict[str, Any]:
    """A streamed Messages request: system prompts go to the top-level
    ``system`` field, the conversation to ``messages``."""
    conversation = chat_messages(turn) if messages is None else messages
    system = [m["content"] for m in conversation if m.get("role") == "system"]
    body: dict[str, Any] = {
        "model": model,
        "stream": True,
        "max_tokens": turn.max_tokens,
        "messages": anthropic_turns([m for m in conversation if m.get("role") != "system"]),
    }
    if system:
        body["system"] = "\n\n".join(system)
    if options.tools:
        body["tools"] = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]}
            for t in options.tools
        ]
    return common_options(body, turn, options)


def anthropic_auth(key: str) -> str:
    """The key in ``x-api-key`` and the API version every request must name."""
    version = f"anthropic-version: {ANTHROPIC_VERSION}\r\n"
    return f"x-api-key: {key}\r\n{version}" if key else version


MESSAGES = Protocol(
    "messages", "/v1/messages", messages_body, parse_event, anthropic_auth, id_holder="message"
)
