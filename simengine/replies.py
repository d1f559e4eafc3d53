"""Non-streamed replies in each API's shape: the whole output in one JSON body.

A reasoning model's reasoning goes where each API puts it: chat's
``message.reasoning_content`` (vLLM), a Responses ``reasoning`` output item,
an Anthropic ``thinking`` content block; usage counts it (chat's
``completion_tokens_details``, Responses' ``output_tokens_details``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from slogate.simengine.messages_sse import STOP_REASONS

__all__ = ["Reply", "whole_body"]


@dataclass(frozen=True, slots=True)
class Reply:
    """What a non-streamed request needs to be answered: its API, id, where its
    text starts in the prose, and how many output tokens are reasoning."""

    api: str
    request_id: str
    text_start: int
    reasoning_tokens: int


def whole_body(
    reply: Reply,
    model: str,
    prompt_tokens: int,
    output_tokens: int,
    finish_reason: str,
    reasoning: str,
    answer: str,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    """The JSON body of a finished, non-streamed request; ``cached_tokens``: the
    prompt tokens found in the prefix cache, reported as each API does."""
    thinking = min(reply.reasoning_tokens, output_tokens)
    if reply.api == "responses":
        body = _responses(
            reply, model, prompt_tokens, output_tokens, finish_reason, reasoning, answer
        )
        body["usage"]["input_tokens_details"] = {"cached_tokens": cached_tokens}
        return body
    if reply.api == "messages":
        content: list[dict[str, Any]] = [{"type": "text", "text": answer}]
        if reasoning:
            content.insert(0, {"type": "thinking", "thinking": reasoning, "signature": ""})
        return {
            "id": reply.request_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": STOP_REASONS.get(finish_reason, finish_reason),
            "stop_sequence": None,
            "usage": {
                "input_tokens": prompt_tokens - cached_tokens,
                "cache_read_input_tokens": cached_tokens,
                "output_tokens": output_tokens,
            },
        }
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + output_tokens,
        "completion_tokens": output_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }
    if thinking:
        usage["completion_tokens_details"] = {"reasoning_tokens": thinking}
    if reply.api == "chat":
        message: dict[str, Any] = {"role": "assistant", "content": answer, "tool_calls": []}
        if reasoning:
            message["reasoning_content"] = reasoning
        choice: dict[str, Any] = {"index": 0, "message": message}
    else:
        choice = {"index": 0, "text": answer}
    choice.update(logprobs=None, finish_reason=finish_reason, stop_reason=None)
    return {
        "id": reply.request_id,
        "object": "chat.completion" if reply.api == "chat" else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage,
    }


def _responses(
    reply: Reply,
    model: str,
    prompt_tokens: int,
    output_tokens: int,
    finish_reason: str,
    reasoning: str,
    answer: str,
) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reasoning:
        output.append(
            {
                "id": f"rea_{reply.request_id}",
                "type": "reasoning",
                "content": [{"type": "reasoning_text", "text": reasoning}],
            }
        )
    output.append(
        {
            "id": f"mes_{reply.request_id}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": answer, "annotations": []}],
        }
    )
    status = "completed" if finish_reason == "stop" else "incomplete"
    return {
        "id": reply.request_id,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": status,
        "incomplete_details": None if status == "completed" else {"reason": "max_output_tokens"},
        "output": output,
        "usage": {
            "input_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "total_tokens": prompt_tokens + output_tokens,
            "output_tokens_details": {
                "reasoning_tokens": min(reply.reasoning_tokens, output_tokens)
            },
        },
    }
