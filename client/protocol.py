"""What every streaming protocol module provides, and the request parts they share.

Each API a scenario can name (``api:``) has one module that knows its wire
format both ways: :mod:`slogate.client.openai_stream` (chat, completions),
:mod:`slogate.client.responses_stream` (OpenAI Responses) and
:mod:`slogate.client.messages_stream` (Anthropic Messages). Each exports a
:class:`Protocol`: the path, the authentication headers, the request body and
the parser of its events; the client and the interpreter stay the same for all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from slogate.scenarios.model import PlannedTurn, RequestOptions

__all__ = [
    "BodyBuilder",
    "Protocol",
    "bearer",
    "chat_messages",
    "common_options",
    "object_id",
    "user_message",
]

MAX_REPLY_ID_CHARS = 256  # an engine's id of its reply, as kept: longer ones are cut

BodyBuilder = Callable[
    [str, PlannedTurn, "list[dict[str, Any]] | None", RequestOptions], dict[str, Any]
]


@dataclass(frozen=True, slots=True)
class Protocol:
    """One API. ``body(model, turn, messages, options)`` is the JSON body;
    ``messages`` is the conversation so far (None: build it from the turn);
    ``auth(key)`` the header lines that carry the API key; ``conversational``
    whether the load side keeps a message history for it; ``streamed`` False
    for an API answered in one JSON body (embeddings), whose ``parse`` is unused;
    ``id_holder`` the key of the object that holds the reply's ``id`` in the
    stream's first event (None: the event itself)."""

    api: str
    path: str
    body: BodyBuilder
    parse: Callable[[bytes | bytearray], Any] | None
    auth: Callable[[str], str]
    conversational: bool = True
    streamed: bool = True
    id_holder: str | None = None

    def reply_id(self, data: bytes | bytearray) -> str | None:
        """The engine's own id of the reply, from its stream's first event
        (read once a request, beside the event's own reading); None when it
        has none."""
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        if type(obj) is dict and self.id_holder is not None:
            obj = obj.get(self.id_holder)
        return object_id(obj)


def object_id(obj: Any) -> str | None:
    """``obj["id"]`` when ``obj`` is an object whose id is a non-empty string
    (cut to ``MAX_REPLY_ID_CHARS``), else None."""
    found = obj.get("id") if type(obj) is dict else None
    return found[:MAX_REPLY_ID_CHARS] if type(found) is str and found else None


def bearer(key: str) -> str:
    """OpenAI-style authentication (the key, when there is one, as a Bearer token)."""
    return f"Authorization: Bearer {key}\r\n" if key else ""


def user_message(turn: PlannedTurn) -> dict[str, Any]:
    """The turn's user message: its text, and its images as ``image_url`` parts."""
    if not turn.images:
        return {"role": "user", "content": turn.user_text}
    parts: list[dict[str, Any]] = [{"type": "text", "text": turn.user_text}]
    parts.extend({"type": "image_url", "image_url": {"url": url}} for url in turn.images)
    return {"role": "user", "content": parts}


def chat_messages(
    turn: PlannedTurn, history: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """The conversation so far (with the assistant's actual replies, or the
    recorded history the turn carries), then this turn."""
    messages: list[dict[str, Any]] = []
    if turn.system_text is not None:
        messages.append({"role": "system", "content": turn.system_text})
    if turn.history is None:
        messages.extend(history)
    else:
        messages.extend({"role": role, "content": text} for role, text in turn.history)
    messages.append(user_message(turn))
    return messages


def common_options(
    body: dict[str, Any], turn: PlannedTurn, options: RequestOptions
) -> dict[str, Any]:
    """The options every protocol passes the same way, then the scenario's extra
    body fields (which the scenario check keeps off the fields set here)."""
    if options.ignore_eos:
        body["ignore_eos"] = True
    if options.min_tokens:
        body["min_tokens"] = turn.max_tokens
    if options.temperature is not None:
        body["temperature"] = options.temperature
    body.update(options.extra_body)
    return body
