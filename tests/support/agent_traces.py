"""The agent traces kept in scenarios/data/agents and token counts of their text,
shared by the trace reader's tests and the runs that replay them."""

from __future__ import annotations

import functools
from pathlib import Path

from slogate.scenarios.prompt_text import LOCAL_TOKENIZER, TokenCounter, tokenizer_counter

DATA = Path(__file__).resolve().parents[2] / "scenarios" / "data" / "agents"


WEKA = DATA / "coding-session.weka.json"


OTEL = DATA / "coding-session.otel.json"


def count(text: str) -> int:
    """Tokens of ``text``; the tokenizer is loaded on first use, not at collection."""
    return counter()(text)


@functools.cache
def counter() -> TokenCounter:
    return tokenizer_counter(str(LOCAL_TOKENIZER))


def common_tokens(a: str, b: str) -> int:
    """Tokens of the longest run of characters ``a`` and ``b`` start with."""
    same = next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )
    return count(a[:same])
