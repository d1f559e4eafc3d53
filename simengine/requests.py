"""What a request to each API asks for, read from its JSON body: the messages
(chat, the Responses API's ``input`` and ``instructions``, the Messages API's
``system``), the output limit under each API's name, whether a reasoning model
may think, and whether this reply is an agent's tool call. Pure: no engine
state, so the server's handlers stay about serving.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Mapping
from typing import Any

from slogate.simengine import token_io as text

__all__ = [
    "ID_PREFIXES",
    "MAX_TOOL_CALLS",
    "REQUEST_ID_HEADER",
    "ApiError",
    "anthropic_messages",
    "chat_messages",
    "int_field",
    "output_limit",
    "planned_tool_call",
    "reply_id",
    "responses_messages",
    "thinking_enabled",
]


class ApiError(Exception):
    """An error answered as ``{"error": {...}}`` with an HTTP status."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


ID_PREFIXES = {
    "chat": "chatcmpl-",
    "completions": "cmpl-",
    "responses": "resp_",
    "messages": "msg_",
}
REQUEST_ID_HEADER = "X-Request-Id"
# vLLM 0.32 names a chat or completions reply after the request's X-Request-Id
# (``chatcmpl-<id>``, ``cmpl-<id>``: _base_request_id in its
# entrypoints/serve/engine/serving.py), whether or not it runs with
# --enable-request-id-headers; its Responses API ignores the header
HONOURS_REQUEST_ID = ("chat", "completions")


def reply_id(api: str, request_id: str | None) -> str:
    """The id of the reply to an ``api`` request that came with the header
    ``request_id`` (None: it had none), as vLLM makes it: the header's
    value after the API's prefix, else a random one."""
    if request_id is None or api not in HONOURS_REQUEST_ID:
        request_id = uuid.uuid4().hex
    return ID_PREFIXES[api] + request_id


def int_field(body: Mapping[str, Any], key: str, default: int | None, minimum: int) -> int | None:
    value = body.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ApiError(400, f"{key} must be an integer >= {minimum}, got {value!r}")
    return value


def request_priority(body: Mapping[str, Any]) -> int:
    """vLLM's ``priority`` field: any 64-bit integer, 0 when absent; the
    scheduler reads it only under the priority policy, as vLLM does."""
    value = body.get("priority", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        raise ApiError(400, f"priority must be a 64-bit integer, got {value!r}")
    return value


def chat_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list")
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise ApiError(400, "each message must be an object with a role")
        try:
            text.message_text(message.get("content"))
        except ValueError as exc:
            raise ApiError(400, str(exc)) from exc
    return messages


def _image_part(url: Any) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def _responses_part(part: Any) -> Any:
    """A Responses content part in chat's shape (``input_image`` as ``image_url``)."""
    if isinstance(part, dict) and part.get("type") == "input_image":
        return _image_part(part.get("image_url"))
    return part


def _responses_item(item: Any) -> Any:
    """One ``input`` item as a chat message: a ``function_call`` is the
    assistant's (its name and arguments are its text), a
    ``function_call_output`` a ``tool`` message."""
    if not isinstance(item, dict):
        return item
    kind = item.get("type")
    if kind == "function_call":
        return {"role": "assistant", "content": f"{item.get('name')}{item.get('arguments')}"}
    if kind == "function_call_output":
        return {"role": "tool", "content": str(item.get("output"))}
    content = item.get("content")
    if isinstance(content, list):
        return {**item, "content": [_responses_part(p) for p in content]}
    return item


def responses_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses API's ``instructions`` and ``input`` (a string or items),
    as chat messages."""
    given = body.get("input")
    items = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(items, list) or not items:
        raise ApiError(400, "input must be a string or a non-empty list of messages")
    messages = [_responses_item(item) for item in items]
    if isinstance(body.get("instructions"), str):
        messages = [{"role": "system", "content": body["instructions"]}, *messages]
    return chat_messages({"messages": messages})


def _anthropic_block(block: Any) -> Any:
    """A content block in chat's shape: a base64 ``image`` as a ``data:`` URL
    part (a ``url`` source stays a URL, which the engine refuses to fetch)."""
    if not isinstance(block, dict) or block.get("type") != "image":
        return block
    source = block.get("source")
    if not isinstance(source, dict):
        raise ApiError(400, "an image block needs a source object")
    if source.get("type") == "base64":
        return _image_part(f"data:{source.get('media_type')};base64,{source.get('data')}")
    return _image_part(source.get("url"))


def _anthropic_message(message: Any) -> list[Any]:
    """One Messages turn as chat messages: ``tool_result`` blocks become
    ``tool`` messages, ``tool_use`` blocks the assistant's text (name and input)."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return [message]
    parts: list[Any] = []
    results: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "tool_result":
            results.append({"role": "tool", "content": block.get("content")})
        elif kind == "tool_use":
            parts.append({"type": "text", "text": f"{block.get('name')}{block.get('input')}"})
        else:
            parts.append(_anthropic_block(block))
    turn = [{**message, "content": parts}] if parts or not results else []
    return [*results, *turn]


def anthropic_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Messages API's top-level ``system`` (a string or text blocks) and
    messages, as chat messages."""
    given = body.get("messages")
    if isinstance(given, list):
        given = [m for turn in given for m in _anthropic_message(turn)]
    messages = chat_messages({"messages": given})
    system = body.get("system")
    if system is not None:
        try:
            system_text = text.message_text(system)
        except ValueError as exc:
            raise ApiError(400, f"system: {exc}") from exc
        messages = [{"role": "system", "content": system_text}, *messages]
    return messages


def output_limit(body: Mapping[str, Any], api: str) -> int | None:
    """The output limit under each API's name for it (None: up to the context)."""
    if api == "chat":
        limit = int_field(body, "max_completion_tokens", None, 1)
        return limit if limit is not None else int_field(body, "max_tokens", None, 1)
    if api == "completions":
        return int_field(body, "max_tokens", 16, 1)  # vLLM/OpenAI default
    if api == "responses":
        return int_field(body, "max_output_tokens", None, 1)
    if "max_tokens" not in body:
        raise ApiError(400, "max_tokens: Field required")  # Anthropic requires it
    return int_field(body, "max_tokens", None, 1)


def thinking_enabled(body: Mapping[str, Any], api: str) -> bool:
    """Whether the request lets a reasoning model think: Qwen3-style
    ``chat_template_kwargs.enable_thinking``, Anthropic ``thinking.type``, the
    Responses API's ``reasoning.effort`` of ``none``; completions never (no
    chat template opens a thinking block)."""
    if api == "completions":
        return False
    kwargs = body.get("chat_template_kwargs")
    if isinstance(kwargs, dict) and kwargs.get("enable_thinking") is False:
        return False
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "disabled":
        return False
    reasoning = body.get("reasoning")
    return not (isinstance(reasoning, dict) and reasoning.get("effort") == "none")


MAX_TOOL_CALLS = 3


def _tool_name(tool: Any) -> str | None:
    """A tool definition's name: chat nests it in ``function``, the Responses
    and Messages APIs do not."""
    if not isinstance(tool, dict):
        return None
    function = tool.get("function")
    name = (function if isinstance(function, dict) else tool).get("name")
    return name if isinstance(name, str) else None


def planned_tool_call(
    body: Mapping[str, Any], messages: list[dict[str, Any]], api: str
) -> tuple[str, str] | None:
    """(call id, function name) when this reply is a tool call, else None;
    ``messages`` is the conversation as chat messages.

    An agent's session calls a tool 1 to ``MAX_TOOL_CALLS`` times, the count
    fixed by its first user message (so every step of one session agrees),
    then answers: a reply is a tool call while fewer ``tool`` results than that
    are in the conversation. ``tool_choice`` ``none`` or no tools: never."""
    tools = body.get("tools")
    choice = body.get("tool_choice")
    if isinstance(choice, dict):  # Anthropic: {"type": "none"}
        choice = choice.get("type")
    if api == "completions" or not isinstance(tools, list) or choice == "none":
        return None
    names = [name for name in map(_tool_name, tools) if name is not None]
    first = next((m for m in messages if m.get("role") == "user"), None)
    if not names or first is None:
        return None
    seed = zlib.crc32(text.message_text(first.get("content")).encode())
    answered = sum(1 for m in messages if m.get("role") == "tool")
    if answered >= 1 + seed % MAX_TOOL_CALLS:
        return None
    return f"call_{uuid.uuid4().hex[:24]}", names[seed % len(names)]
