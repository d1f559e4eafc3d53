"""Tokens in and text out: prompt token counting and prose to stream back.

Prompts are counted with the SmolLM2 tokenizer bundled with ``scenarios`` (the
same one the load side may count with), with ChatML framing around each chat
message. Generated tokens are real tokens of real prose: Python's own
documentation (``pydoc_data.topics``) tokenized once, so streamed text reads
like text and re-tokenizing a response gives about as many tokens as the
engine reported.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

import orjson
from tokenizers import Tokenizer

# Prompts longer than this (characters) are tokenized off the event loop:
# tokenizers' batch call releases the GIL, so the engine's steps keep time.
OFFLOAD_CHARS = 4096


@cache
def tokenizer() -> Tokenizer:
    """The SmolLM2-135M tokenizer, loaded once per process."""
    path = resources.files("slogate.scenarios").joinpath(
        "data/tokenizers/smollm2-135m/tokenizer.json"
    )
    return Tokenizer.from_str(path.read_text("utf-8"))


def message_text(content: Any) -> str:
    """A chat message's text: a string, a list of ``{"type": "text"}`` parts, or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    raise ValueError("message content must be a string, a list of parts or null")


def prompt_chars(messages: Iterable[Mapping[str, Any]]) -> int:
    return sum(len(message_text(m.get("content"))) for m in messages)


def encode_text(text: str) -> list[int]:
    return tokenizer().encode_batch_fast([text], add_special_tokens=False)[0].ids


def encode_chat(
    messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = True
) -> list[int]:
    """Token ids of ``<|im_start|>ROLE\\nCONTENT<|im_end|>\\n`` per message, then
    ``<|im_start|>assistant\\n`` (SmolLM2's ChatML, without its default system
    prompt). Message contents are tokenized in one batch call."""
    tok = tokenizer()
    roles = [str(m.get("role", "user")) for m in messages]
    texts = [message_text(m.get("content")) for m in messages]
    framed = [f"<|im_start|>{role}\n" for role in roles]
    if add_generation_prompt:
        framed.append("<|im_start|>assistant\n")
    encoded = tok.encode_batch_fast(texts + framed + ["<|im_end|>\n"], add_special_tokens=False)
    contents, heads, tail = encoded[: len(texts)], encoded[len(texts) : -1], encoded[-1].ids
    ids: list[int] = []
    for head, content in zip(heads[: len(contents)], contents, strict=True):
        ids += head.ids
        ids += content.ids
        ids += tail
    if add_generation_prompt:
        ids += heads[-1].ids
    return ids


def _prose_paragraphs() -> list[str]:
    """Running text from the Python documentation: unindented paragraphs (code
    samples are indented), headings and their underlines dropped."""
    from pydoc_data.topics import topics

    paragraphs = []
    for topic in sorted(topics):
        for block in re.split(r"\n\s*\n", topics[topic]):
            lines = block.splitlines()
            if len(lines) < 2 or any(line.startswith((" ", "\t")) for line in lines):
                continue
            if re.fullmatch(r"[*=\-^~]+", lines[-1].strip()):
                continue
            paragraph = " ".join(line.strip() for line in lines)
            if len(paragraph.split()) >= 20:
                paragraphs.append(paragraph)
    return paragraphs


class Prose:
    """A long token stream of prose; a response is a slice of it, starting at a
    random offset and wrapping around at the end."""

    def __init__(self, max_chars: int = 150_000) -> None:
        text = ""
        for paragraph in _prose_paragraphs():
            if len(text) >= max_chars:
                break
            text += paragraph + "\n\n"
        encoding = tokenizer().encode(text, add_special_tokens=False)
        starts = [start for start, _ in encoding.offsets] + [len(text)]
        self.texts: list[str] = [text[a:b] for a, b in itertools.pairwise(starts)]
        # JSON-escaped UTF-8 of each token, ready to splice into a JSON string.
        self.escaped: list[bytes] = [orjson.dumps(t)[1:-1] for t in self.texts]
        # Where a response may begin: at a word, not inside one.
        self.word_starts: list[int] = [i for i, t in enumerate(self.texts) if t.startswith(" ")]

    def __len__(self) -> int:
        return len(self.texts)

    def escaped_slice(self, start: int, n: int) -> bytes:
        """JSON-escaped text of ``n`` tokens from ``start`` (mod the length)."""
        size = len(self.escaped)
        start %= size
        end = start + n
        if end <= size:
            return b"".join(self.escaped[start:end])
        return b"".join(self.escaped[start:]) + self.escaped_slice(0, end - size)

    def text_slice(self, start: int, n: int) -> str:
        size = len(self.texts)
        start %= size
        end = start + n
        if end <= size:
            return "".join(self.texts[start:end])
        return "".join(self.texts[start:]) + self.text_slice(0, end - size)
