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

from slogate.simengine import text

__all__ = [
    "ID_PREFIXES",
    "MAX_TOOL_CALLS",
    "ApiError",
    "anthropic_messages",
    "chat_messages",
    "int_field",
    "output_limit",
    "planned_tool_call",
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


def int_field(body: Mapping[str, Any], key: str, default: int | None, minimum: int) -> int | None:
    value = body.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ApiError(400, f"{key} must be an integer >= {minimum}, got {value!r}")
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


def responses_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Responses API's ``instructions`` and ``input`` (a string or messages)."""
    given = body.get("input")
    messages = [{"role": "user", "content": given}] if isinstance(given, str) else given
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "input must be a string or a non-empty list of messages")
    if isinstance(body.get("instructions"), str):
        messages = [{"role": "system", "content": body["instructions"]}, *messages]
    return chat_messages({"messages": messages})


def anthropic_messages(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Messages API's top-level ``system`` (a string or text blocks) and messages."""
    messages = chat_messages(body)
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


def planned_tool_call(body: Mapping[str, Any], api: str) -> tuple[str, str] | None:
    """(call id, function name) when this chat reply is a tool call, else None.

    An agent's session calls a tool 1 to ``MAX_TOOL_CALLS`` times, the count
    fixed by its first user message (so every step of one session agrees),
    then answers: a reply is a tool call while fewer ``tool`` results than that
    are in the conversation. ``tool_choice: none`` or no tools: never."""
    tools = body.get("tools")
    if api != "chat" or not isinstance(tools, list) or body.get("tool_choice") == "none":
        return None
    names = [
        t["function"]["name"]
        for t in tools
        if isinstance(t, dict)
        and isinstance(t.get("function"), dict)
        and isinstance(t["function"].get("name"), str)
    ]
    messages = body.get("messages") or []
    first = next((m for m in messages if m.get("role") == "user"), None)
    if not names or first is None:
        return None
    seed = zlib.crc32(text.message_text(first.get("content")).encode())
    answered = sum(1 for m in messages if m.get("role") == "tool")
    if answered >= 1 + seed % MAX_TOOL_CALLS:
        return None
    return f"call_{uuid.uuid4().hex[:24]}", names[seed % len(names)]
