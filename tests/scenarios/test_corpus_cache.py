"""The tokenized prompt corpus is kept in the user's cache between processes
(scenarios/prompt_text.py): loaded, it is the same corpus; damaged, it is rebuilt."""

from __future__ import annotations

import numpy as np
import pytest

from slogate.scenarios import prompt_text as text
from slogate.scenarios.prompt_text import LOCAL_TOKENIZER, load_tokenizer, tokenized_corpus


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    tokenized_corpus.cache_clear()
    yield tmp_path / "slogate" / "corpora"
    tokenized_corpus.cache_clear()


def same(a: text.TokenizedCorpus, b: text.TokenizedCorpus) -> bool:
    return (
        a.text == b.text
        and a.join_tokens == b.join_tokens
        and all(
            np.array_equal(x, y)
            for x, y in ((a.char_at, b.char_at), (a.starts, b.starts), (a.ends, b.ends))
        )
    )


def test_the_cached_corpus_is_the_tokenized_one(cache):
    fresh = text._tokenize_corpus(text.corpus_text("prose"), load_tokenizer(str(LOCAL_TOKENIZER)))
    first = tokenized_corpus("prose", str(LOCAL_TOKENIZER))
    [entry] = cache.glob("prose-*.npz")
    tokenized_corpus.cache_clear()
    loaded = tokenized_corpus("prose", str(LOCAL_TOKENIZER))
    assert same(first, fresh) and same(loaded, fresh)
    rng = np.random.default_rng(3)
    assert loaded.passage(rng, 300) == fresh.passage(np.random.default_rng(3), 300)
    assert entry.stat().st_size > 0


def test_a_damaged_entry_is_rebuilt(cache):
    fresh = tokenized_corpus("code", str(LOCAL_TOKENIZER))
    [entry] = cache.glob("code-*.npz")
    for damage in (b"not a zip", b""):
        entry.write_bytes(damage)
        tokenized_corpus.cache_clear()
        assert same(tokenized_corpus("code", str(LOCAL_TOKENIZER)), fresh)
    truncated = dict(np.load(entry))
    truncated["char_at"] = truncated["char_at"][:-5]  # boundaries of another text
    with entry.open("wb") as f:
        np.savez(f, **truncated)
    tokenized_corpus.cache_clear()
    assert same(tokenized_corpus("code", str(LOCAL_TOKENIZER)), fresh)
