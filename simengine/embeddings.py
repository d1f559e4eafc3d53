"""``POST /v1/embeddings``: a batch of texts, one pooled vector each.

Every input becomes a sequence of one output step in the engine (vLLM runs a
pooling model as prefill only; the one step stands for the pooling), so a
batch costs its prefill compute and queues with everything else the engine
runs. Served only by a profile whose model is an embedding model
(``embedding_dimensions``); a generative model answers 400, as vLLM does, and
an embedding model refuses the generation routes the same way. The vector is
the same unit vector for every input: its values are not what is measured.
"""

from __future__ import annotations

import asyncio
import base64
import math
import struct
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any

import orjson

from slogate.simengine import token_io as text
from slogate.simengine.engine import TokenStream
from slogate.simengine.scheduler import Sequence

__all__ = ["EmbeddingError", "embedding_reply", "input_texts"]


class EmbeddingError(ValueError):
    """A bad embeddings request (answered 400)."""


def input_texts(body: Mapping[str, Any]) -> list[str | list[int]]:
    """``input`` as a list: texts, or token-id lists (a string or one id list alone
    is a batch of one)."""
    given = body.get("input")
    if isinstance(given, str) or (
        isinstance(given, list) and given and all(isinstance(t, int) for t in given)
    ):
        given = [given]
    if not isinstance(given, list) or not given:
        raise EmbeddingError("input must be a string, a list of strings or of token id lists")
    for i, item in enumerate(given):
        ok = isinstance(item, str) or (
            isinstance(item, list) and item and all(isinstance(t, int) for t in item)
        )
        if not ok or item == "":
            raise EmbeddingError(f"input[{i}] must be a non-empty string or token id list")
    return given


@cache
def unit_vector(dimensions: int) -> tuple[list[float], str]:
    """The reply's vector, as floats and as base64 float32 (``encoding_format``)."""
    value = 1.0 / math.sqrt(dimensions)
    floats = [value] * dimensions
    return floats, base64.b64encode(struct.pack(f"<{dimensions}f", *floats)).decode()


async def embed(engine: Any, ids: list[list[int]]) -> None:
    """Run each input's prefill (and its pooling step) through the engine."""
    seqs = [Sequence(f"embd-{uuid.uuid4().hex}", len(t), 1) for t in ids]
    streams = [TokenStream(seq) for seq in seqs]
    try:
        for seq in seqs:
            engine.submit(seq)
        await asyncio.gather(*(stream.wait(1) for stream in streams))
    finally:
        for seq in seqs:
            engine.abort(seq)


def embedding_reply(
    model: str, dimensions: int, prompt_tokens: int, count: int, encoding: str
) -> bytes:
    floats, packed = unit_vector(dimensions)
    vector: Any = packed if encoding == "base64" else floats
    data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(count)]
    usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return orjson.dumps({"object": "list", "data": data, "model": model, "usage": usage})


def tokenize_inputs(inputs: list[str | list[int]]) -> list[list[int]]:
    return [item if isinstance(item, list) else text.encode_text(item) for item in inputs]
