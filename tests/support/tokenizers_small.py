"""A tokenizer unlike SmolLM2's, trained here: for counting that must not assume one vocabulary."""

from __future__ import annotations

from pathlib import Path

from slogate.scenarios.prompt_text import corpus_text


def small_tokenizer(path: Path) -> Path:
    """A byte-level BPE tokenizer with a vocabulary unlike SmolLM2's, trained
    here on the prose and code corpora."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=3000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    texts = [corpus_text(kind)[:300_000] for kind in ("prose", "code")]
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(path))
    return path
