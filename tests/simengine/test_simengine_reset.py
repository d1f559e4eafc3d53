"""The simulated engine's ``POST /reset_prefix_cache`` (vLLM's development
route): a repeated prompt is served from the prefix cache until the reset, and
computed whole after it; a cache still held by a running sequence is kept, as
vLLM keeps it, and the answer says so. The tune's client of that route
(engines/tunable_served.py) retries a refusal, then fails."""

from __future__ import annotations

import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from slogate.engines.simulated import Deployment, start_engine
from slogate.engines.tunable_served import CacheResetFailed, reset_prefix_cache
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


@pytest.mark.slow  # starts engines
def test_reset_prefix_cache_makes_a_repeated_prompt_compute_again() -> None:
    with start_engine(speedup=50, served_model_name="m") as engine:
        assert cached_tokens(engine.url) == 0
        warm = cached_tokens(engine.url)
        assert warm > 500  # all of the prompt's full blocks
        status, body = call(engine.url + "/reset_prefix_cache")
        assert (status, json.loads(body)) == (200, {"success": True})  # vLLM 0.32's answer
        assert cached_tokens(engine.url) == 0
        assert cached_tokens(engine.url) == warm  # caching still works after it


@pytest.mark.slow  # starts engines
def test_a_deployments_reset_empties_every_replica() -> None:
    with start_engine(speedup=50, served_model_name="m", deployment=Deployment(2)) as engine:
        replicas = engine.replicas()
        for url in replicas.values():  # each replica caches the prompt
            cached_tokens(url)
            assert cached_tokens(url) > 500
        assert json.loads(call(engine.url + "/reset_prefix_cache")[1]) == {"success": True}
        assert [cached_tokens(url) for url in replicas.values()] == [0, 0]


@pytest.mark.slow  # starts engines
def test_a_reset_while_a_request_runs_is_refused_then_retried() -> None:
    # speedup 1: a 2,000-token answer holds its blocks for seconds; the engine
    # stops first, which ends the request
    body = {"model": "m", "prompt": PROMPT, "max_tokens": 2000, "ignore_eos": True}
    with ThreadPoolExecutor(1) as pool, start_engine(served_model_name="m") as engine:
        pool.submit(call, engine.url + "/v1/completions", body)
        while engine.stats()["running"] == 0:
            time.sleep(0.01)
        assert json.loads(call(engine.url + "/reset_prefix_cache")[1]) == {"success": False}
        with pytest.raises(CacheResetFailed, match="refused 3 times"):
            reset_prefix_cache(engine.url, attempts=3, wait_s=0.05)
    with start_engine(speedup=50, served_model_name="m") as engine:
        reset_prefix_cache(engine.url)  # an idle engine: the first answer is a success


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
