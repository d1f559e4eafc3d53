"""The embeddings API (``POST /v1/embeddings``): one batch of texts in, one vector
per text out, not streamed.

The request is timed whole: the record has no output chunks (so no TTFT or
ITL), its end is the arrival of the reply's last bytes, its input tokens come
from ``usage.prompt_tokens``. A reply is checked, not trusted: one embedding per
input (``data[i].embedding``, a list of numbers or, with
``encoding_format: base64``, a string), else the request failed as ``protocol``.
"""

from __future__ import annotations

from typing import Any

import orjson

from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.client.openai_stream import ImplausibleUsage, usage_int
from slogate.client.protocol import Protocol, bearer, object_id
from slogate.scenarios.model import PlannedTurn, RequestOptions

__all__ = ["EMBEDDINGS", "embeddings_body", "read_reply"]


def embeddings_body(
    model: str, turn: PlannedTurn, messages: list[dict[str, Any]] | None, options: RequestOptions
) -> dict[str, Any]:
    """The batch of the turn's texts (its user text when it has no batch)."""
    del messages  # not a conversation
    body: dict[str, Any] = {
        "model": model,
        "input": list(turn.inputs) or [turn.user_text],
        "encoding_format": "float",
    }
    body.update(options.extra_body)
    return body


def _vector_ok(item: Any) -> bool:
    if type(item) is not dict:
        return False
    vector = item.get("embedding")
    return (type(vector) is list and len(vector) > 0) or (type(vector) is str and vector != "")


def read_reply(record: RequestRecord, body: bytes, expected: int) -> tuple[ErrorKind, str] | None:
    """Fill ``record`` from a reply to a batch of ``expected`` texts; the failure
    (kind, message) when the reply is not one embedding per text."""
    try:
        obj: Any = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        return ErrorKind.PROTOCOL, f"embeddings reply is not JSON ({exc}): {body[:200]!r}"
    data = obj.get("data") if type(obj) is dict else None
    if type(data) is not list:
        return ErrorKind.PROTOCOL, f"embeddings reply has no 'data' list: {body[:200]!r}"
    if len(data) != expected:
        return ErrorKind.PROTOCOL, f"{len(data)} embeddings for {expected} inputs"
    bad = next((i for i, item in enumerate(data) if not _vector_ok(item)), None)
    if bad is not None:
        return ErrorKind.PROTOCOL, f"data[{bad}] has no embedding vector"
    usage = obj.get("usage")
    if type(usage) is dict:
        try:
            record.input_tokens = usage_int(usage, "prompt_tokens")
        except ImplausibleUsage as exc:
            return ErrorKind.PROTOCOL, str(exc)
    record.engine_request_id = object_id(obj)
    record.output_tokens = 0  # nothing generated: an exact count
    record.inputs = expected
    record.finish_reason = "stop"
    return None


EMBEDDINGS = Protocol(
    "embeddings",
    "/v1/embeddings",
    embeddings_body,
    None,
    bearer,
    conversational=False,
    streamed=False,
)
