"""Token counts of a data file's texts, kept on disk between runs.

Counting a large conversation dump is the slow part of loading it (the
bundled tokenizer counted about 150k tokens/s on 2 shared cores: minutes for
a ShareGPT-sized file), and every run, every worker process and every
``scenario check`` loads it again. The counts are stored under the user's
cache, keyed by a hash of the texts and of the tokenizer file, so they are
only ever counted once and never go stale.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from slogate.scenarios.cache import cache_dir, store
from slogate.scenarios.prompt_text import count_batch


def token_counts(tokenizer: str, texts: Sequence[str]) -> list[int]:
    """Token counts of ``texts`` with the ``tokenizer.json`` at ``tokenizer``,
    from the cache when these texts were counted with it before."""
    import numpy as np

    digest = hashlib.blake2b(Path(tokenizer).read_bytes(), digest_size=16)
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\0")
    path = cache_dir("token-counts") / f"{digest.hexdigest()}.npy"
    try:
        cached = np.load(path)
        if cached.shape == (len(texts),):
            return cached.tolist()
    except (OSError, ValueError):
        pass
    counts = count_batch(tokenizer, texts)
    store(path, lambda f: np.save(f, np.array(counts, dtype=np.int64)))
    return counts
