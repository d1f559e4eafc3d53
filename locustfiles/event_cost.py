"""A recorded chat stream, parsed and recorded as a run does: what one output
event costs this machine's load process, without a socket.

``--processes auto`` times it before a run (``processes.py``) and
``bench/bench_client.py micro`` profiles the same path; both replay the bytes
an OpenAI-compatible engine (vLLM's chunk form) sends for a chat stream.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from slogate.analysis.measurement.records import RequestRecord
from slogate.client.openai_stream import StreamInterpreter
from slogate.client.sse import SSEParser

CHUNK_GAP_NS = 20_000_000
WORDS = ("The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog.")


def _event(choices: list[dict], **extra: object) -> bytes:
    chunk = {
        "id": "chatcmpl-calibration",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": choices,
        **extra,
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def chat_stream(tokens: int, prompt_tokens: int = 9) -> list[bytes]:
    """The SSE reads of a ``tokens``-long chat completion, one token a chunk:
    the role chunk, the tokens (the last with its finish reason), usage, [DONE]."""
    reads = [_event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])]
    for k in range(tokens):
        finish = "length" if k == tokens - 1 else None
        delta = {"content": WORDS[k % len(WORDS)]}
        reads.append(_event([{"index": 0, "delta": delta, "finish_reason": finish}]))
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}
    usage["total_tokens"] = prompt_tokens + tokens
    reads.append(_event([], usage=usage))
    reads.append(b"data: [DONE]\n\n")
    return reads


def parse_stream(
    reads: Sequence[bytes | bytearray], scenario: str = "calibration"
) -> RequestRecord:
    """One request's record from its reads, a chunk every ``CHUNK_GAP_NS``."""
    record = RequestRecord(scenario, 1)
    interpreter = StreamInterpreter(record)
    parser = SSEParser()
    for i, read in enumerate(reads):
        interpreter.on_piece(parser, read, 1 + i * CHUNK_GAP_NS)
    return record
