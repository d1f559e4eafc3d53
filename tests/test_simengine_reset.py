"""The simulated engine's POST /reset_prefix_cache: cached prefixes are forgotten,
blocks in use are kept (what a tune relies on between treatments)."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass, field

from slogate.engines.simulated import start_engine
from slogate.simengine.kvcache import KVCache


@dataclass
class Seq:
    prompt_hashes: list[int]
    num_computed: int
    num_blocks: int = 0
    num_shared: int = 0
    extra: list[int] = field(default_factory=list)


def test_reset_drops_released_prefixes_and_keeps_held_blocks() -> None:
    kv = KVCache(num_blocks=10, block_size=4, prefix_caching=True)
    done, held = Seq([1, 2, 3], num_computed=12), Seq([7, 8], num_computed=8)
    for seq in (done, held):
        assert kv.admit(seq, 0, len(seq.prompt_hashes))
        kv.publish(seq)
    kv.release(done)
    assert kv.cached_prefix(Seq([1, 2, 3], 0), 3) == 3
    assert kv.reset_prefix_cache() == 3
    assert kv.cached_prefix(Seq([1, 2, 3], 0), 3) == 0
    assert kv.cached_prefix(Seq([7, 8], 0), 2) == 2  # still held by a running sequence
    assert kv.num_free == 8
    kv.release(held)
    assert kv.num_free == 10


def test_the_route_answers_200_like_vllm() -> None:
    with start_engine(speedup=4) as engine:
        request = urllib.request.Request(engine.url + "/reset_prefix_cache", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status == 200
