"""The paged KV cache: a pool of fixed-size blocks with optional prefix caching.

As in vLLM, memory is handed out in blocks of ``block_size`` tokens, so a
sequence holds ceil(tokens / block_size) blocks and the cache is full when the
pool is empty, not when the sum of lengths reaches some limit. With prefix
caching, a full block of prompt tokens is identified by a hash chained over all
blocks before it (the same content at a different position is a different
block); a finished sequence's hashed blocks stay in the cache, evictable in LRU
order, so a later request with the same prefix skips that part of its prefill.

Only counts and hashes are kept: the simulator needs occupancy, not tensors.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence as SequenceType
from typing import Protocol


class HoldsBlocks(Protocol):
    """What the cache needs of a sequence (``scheduler.Sequence`` has it)."""

    num_blocks: int  # blocks held
    num_shared: int  # leading blocks that are hashed and shared via the cache
    prompt_hashes: SequenceType[int]  # hashes of the prompt's full blocks
    num_computed: int  # tokens whose KV has been computed


def block_hashes(token_ids: SequenceType[int], block_size: int) -> list[int]:
    """Chained hashes of the full blocks of ``token_ids`` (a partial last block
    is never shared, as in vLLM)."""
    hashes = []
    parent = 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = hash((parent, tuple(token_ids[start : start + block_size])))
        hashes.append(parent)
    return hashes


class KVCache:
    """Block accounting: free blocks, cached (hashed) blocks with reference
    counts, and the LRU order in which unreferenced cached blocks are evicted."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self._free = num_blocks  # neither held nor cached
        self._refs: dict[int, int] = {}  # hash -> sequences holding that block
        self._evictable: OrderedDict[int, None] = OrderedDict()  # refs == 0, LRU first
        self.peak_used = 0

    @property
    def num_free(self) -> int:
        """Blocks an allocation may take: free ones plus evictable cached ones."""
        return self._free + len(self._evictable)

    @property
    def num_used(self) -> int:
        return self.num_blocks - self.num_free

    @property
    def usage(self) -> float:
        """Fraction of blocks held by sequences (vLLM's ``kv_cache_usage_perc``)."""
        return self.num_used / self.num_blocks

    def cached_prefix(self, seq: HoldsBlocks, max_blocks: int) -> int:
        """How many leading prompt blocks of ``seq`` are in the cache."""
        if not self.prefix_caching:
            return 0
        refs = self._refs
        hits = 0
        for h in seq.prompt_hashes[:max_blocks]:
            if h not in refs:
                break
            hits += 1
        return hits

    def admit(self, seq: HoldsBlocks, hits: int, new_blocks: int) -> bool:
        """Give a waiting sequence its ``hits`` cached prefix blocks plus
        ``new_blocks`` fresh ones, or nothing (False) if they do not fit."""
        hit_hashes = seq.prompt_hashes[:hits]
        refs = self._refs
        reviving = sum(1 for h in hit_hashes if refs[h] == 0)
        if new_blocks + reviving > self.num_free:
            return False
        for h in hit_hashes:
            if refs[h] == 0:
                del self._evictable[h]
            refs[h] += 1
        self._take(new_blocks)
        seq.num_blocks = hits + new_blocks
        seq.num_shared = hits
        return True

    def grow(self, seq: HoldsBlocks, new_blocks: int) -> bool:
        """Add blocks to a running sequence, or nothing (False) if none are left."""
        if new_blocks > self.num_free:
            return False
        self._take(new_blocks)
        seq.num_blocks += new_blocks
        return True

    def publish(self, seq: HoldsBlocks) -> None:
        """Hash the prompt blocks ``seq`` has filled since the last call so later
        requests can share them. A block another sequence already published is
        shared instead and this sequence's copy returns to the pool."""
        full = min(seq.num_computed // self.block_size, len(seq.prompt_hashes))
        refs = self._refs
        for h in seq.prompt_hashes[seq.num_shared : full]:
            ref = refs.get(h)
            if ref is None:
                refs[h] = 1
            else:
                if ref == 0:
                    del self._evictable[h]
                refs[h] = ref + 1
                self._free += 1
        if full > seq.num_shared:
            seq.num_shared = full

    def release(self, seq: HoldsBlocks) -> None:
        """Return all of ``seq``'s blocks. Shared blocks stay cached; the tail
        blocks go first in the eviction order, as in vLLM."""
        refs = self._refs
        for h in reversed(seq.prompt_hashes[: seq.num_shared]):
            ref = refs[h] - 1
            refs[h] = ref
            if ref == 0:
                self._evictable[h] = None
        self._free += seq.num_blocks - seq.num_shared
        seq.num_blocks = 0
        seq.num_shared = 0

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block, as vLLM's ``reset_prefix_cache`` does, so
        the next request computes its whole prompt; refused (False) while any
        sequence holds blocks, as vLLM refuses while blocks are in use."""
        if self.num_used:
            return False
        self._free += len(self._evictable)
        self._evictable.clear()
        self._refs.clear()
        return True

    def _take(self, n: int) -> None:
        if n <= self._free:
            self._free -= n
        else:
            for _ in range(n - self._free):
                h, _ = self._evictable.popitem(last=False)
                del self._refs[h]
            self._free = 0
        used = self.num_blocks - self._free - len(self._evictable)
        if used > self.peak_used:
            self.peak_used = used
