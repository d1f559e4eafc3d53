"""The simulated engine's ``POST /reset_prefix_cache`` (vLLM's development
route): a repeated prompt is served from the prefix cache until the reset, and
computed whole after it; a cache still held by a running sequence is kept, as
vLLM keeps it."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from slogate.engines.simulated import Deployment, start_engine
from slogate.simengine.kvcache import KVCache, block_hashes
from slogate.simengine.scheduler import Sequence

PROMPT = " ".join(f"word{i}" for i in range(600))


def call(url: str, body: dict[str, Any] | None = None) -> tuple[int, bytes]:
    data = json.dumps(body).encode() if body is not None else b""
    request = urllib.request.Request(url, data=data, method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read()


def cached_tokens(url: str) -> int:
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 2, "ignore_eos": True}
    _, answer = call(url + "/v1/completions", body)
    return int(json.loads(answer)["usage"]["prompt_tokens_details"]["cached_tokens"])


def test_reset_prefix_cache_makes_a_repeated_prompt_compute_again() -> None:
    with start_engine(speedup=50, served_model_name="m") as engine:
        assert cached_tokens(engine.url) == 0
        warm = cached_tokens(engine.url)
        assert warm > 500  # all of the prompt's full blocks
        status, body = call(engine.url + "/reset_prefix_cache")
        assert (status, body) == (200, b"")  # vLLM's answer: 200, no body
        assert cached_tokens(engine.url) == 0
        assert cached_tokens(engine.url) == warm  # caching still works after it


def test_a_deployments_reset_empties_every_replica() -> None:
    with start_engine(speedup=50, served_model_name="m", deployment=Deployment(2)) as engine:
        replicas = engine.replicas()
        for url in replicas.values():  # each replica caches the prompt
            cached_tokens(url)
            assert cached_tokens(url) > 500
        assert call(engine.url + "/reset_prefix_cache") == (200, b"")
        assert [cached_tokens(url) for url in replicas.values()] == [0, 0]


def sequence(tokens: int, block_size: int) -> Sequence:
    return Sequence("s", tokens, 1, prompt_hashes=block_hashes(list(range(tokens)), block_size))


def test_reset_is_refused_while_a_sequence_holds_blocks() -> None:
    kv = KVCache(num_blocks=8, block_size=4, prefix_caching=True)
    seq = sequence(12, 4)
    assert kv.admit(seq, 0, 3)
    seq.num_computed = 12
    kv.publish(seq)
    assert not kv.reset_prefix_cache()
    assert kv.cached_prefix(sequence(12, 4), 3) == 3
    kv.release(seq)
    assert kv.reset_prefix_cache()
    assert kv.cached_prefix(sequence(12, 4), 3) == 0
    assert kv.num_free == 8
