"""Structured outputs (``response_format``): what a grammar costs the engine,
and an answer that follows the schema.

Two costs, as vLLM's structured-output backend (xgrammar) pays them:

- **Compile**: the first request with a schema waits while its grammar is
  compiled (requests with the same schema meanwhile wait with it); later ones
  find it in the cache. ``COMPILE_S`` is an assumption in the range xgrammar's
  paper reports for JSON schemas on a CPU core (Dong et al., "XGrammar",
  MLSys 2025: tens of milliseconds), and json_object's one grammar is
  compiled once like any other.
- **Mask**: every step computes the token mask of each constrained sequence
  in the batch on the CPU: ``MASK_S`` per constrained sequence per step (the
  same paper: under 40 us per token for JSON), added to the step.

The answer is a JSON document that meets the schema, one token about every
``CHARS_PER_TOKEN`` characters, ended by EOS; ``max_tokens`` can cut it, as a
real engine's would be. The documents follow a subset of JSON Schema: types,
``properties`` (all emitted), ``enum``, ``const``, ``anyOf``/``oneOf`` (the
first), ``items`` with ``minItems``, numeric and length bounds; a keyword
outside it is ignored, so a schema file that leans on one can get answers
that break it (the client's check says so).
"""

from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = [
    "COMPILE_S",
    "MASK_S",
    "Grammars",
    "JsonText",
    "answer_text",
    "answer_tokens",
    "constraint_of",
]

COMPILE_S = 0.05
MASK_S = 40e-6
CACHED_GRAMMARS = 1024
CHARS_PER_TOKEN = 4
WORDS = ("alpha", "bravo", "delta", "echo", "lima", "oscar", "sierra", "tango")


def constraint_of(body: Mapping[str, Any]) -> tuple[str, dict[str, Any] | None] | None:
    """A request's grammar: its cache key and schema (None for json_object),
    or None when ``response_format`` asks for no structure."""
    response_format = body.get("response_format")
    if not isinstance(response_format, dict):
        return None
    kind = response_format.get("type")
    if kind == "json_object":
        return "json_object", None
    if kind != "json_schema":
        return None
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        return None
    return orjson.dumps(schema, option=orjson.OPT_SORT_KEYS).decode(), schema


class Grammars:
    """One engine's grammar cache: a schema's first request waits its
    compile, later ones nothing; the least recently used fall out."""

    def __init__(self, speedup: float) -> None:
        self._speedup = speedup
        self._ready: OrderedDict[str, asyncio.Future[None]] = OrderedDict()

    async def ready(self, key: str) -> None:
        ready = self._ready.get(key)
        if ready is None:
            ready = self._ready[key] = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(COMPILE_S / self._speedup, ready.set_result, None)
            if len(self._ready) > CACHED_GRAMMARS:
                self._ready.popitem(last=False)
        else:
            self._ready.move_to_end(key)
        await asyncio.shield(ready)


def instance(schema: Any, rng: random.Random) -> Any:
    """A value that meets ``schema`` (within the subset the module names)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return instance(schema[key][0], rng)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else None
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties") or {}
        return {name: instance(sub, rng) for name, sub in properties.items()}
    if kind == "array":
        count = max(int(schema.get("minItems", 1)), 1)
        count = min(count, int(schema.get("maxItems", count)))
        return [instance(schema.get("items"), rng) for _ in range(count)]
    if kind == "integer":
        low = int(schema.get("minimum", 0))
        return rng.randint(low, max(low, int(schema.get("maximum", low + 100))))
    if kind == "number":
        least = float(schema.get("minimum", 0))
        return round(rng.uniform(least, max(least, float(schema.get("maximum", least + 100)))), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "string":
        return _string(schema, rng)
    return None


def _string(schema: dict[str, Any], rng: random.Random) -> str:
    text = rng.choice(WORDS)
    while len(text) < int(schema.get("minLength", 0)):
        text += " " + rng.choice(WORDS)
    return text[: int(schema.get("maxLength", len(text)))]


def answer_text(schema: dict[str, Any] | None, rng: random.Random) -> str:
    """The answer a grammar lets through: a document that meets ``schema``
    (json_object, None: an object of one string)."""
    document = {"answer": rng.choice(WORDS)} if schema is None else instance(schema, rng)
    return orjson.dumps(document).decode()


def answer_tokens(text: str) -> int:
    """The output tokens of an answer: its text's, then EOS."""
    return -(-len(text) // CHARS_PER_TOKEN) + 1


class JsonText:
    """An answer's text as tokens, read by the stream as it reads prose
    (:class:`slogate.simengine.token_io.Prose`): ``broken`` drops its last
    character, the closing brace, so it is not JSON (fault injection)."""

    def __init__(self, text: str, broken: bool) -> None:
        if broken:
            text = text[:-1]
        self.texts = [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]
        self.escaped = [orjson.dumps(t)[1:-1] for t in self.texts]

    def __len__(self) -> int:
        return len(self.texts)

    def escaped_slice(self, start: int, n: int) -> bytes:
        return b"".join(self.escaped[start : start + n])

    def text_slice(self, start: int, n: int) -> str:
        return "".join(self.texts[start : start + n])
