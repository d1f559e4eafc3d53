"""RAG-like planned turns whose prompts share a prefix, for prefix-cache checks."""

from __future__ import annotations

from slogate.scenarios.model import PlannedTurn


def rag_turns(n: int, words: int = 300) -> list[PlannedTurn]:
    """RAG-like prompts: one shared instruction of ``words`` words, then one of
    three documents (popular ones recur), then a question of its own."""
    system = " ".join(f"rule{i}" for i in range(words))
    documents = [
        " ".join(f"doc{d}word{i}" for i in range(2 * words // 3 + words // 2 * d)) for d in range(3)
    ]
    return [
        PlannedTurn(
            "rag",
            i,
            0,
            documents[(i * i) % 3] + f" question {i}: what does it say?",
            4,
            1000,
            4,
            system_text=system,
        )
        for i in range(n)
    ]
