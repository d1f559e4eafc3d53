"""Replicas behind a router, served live (`slogate engine --replicas N --router ...`).

Each deployment runs in a child process on 127.0.0.1, as tests start every
engine; requests go through the router's port and each replica's counters are
read from its own port."""

from __future__ import annotations

import json
import re
import statistics
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from slogate.engines.simulated import Deployment, EngineProcess, start_engine
from slogate.simengine.profiles import load_profile
from slogate.simengine.router import session_token
from slogate.simengine.simulate import kv_transfer_seconds

pytestmark = pytest.mark.slow  # engine processes

PROFILE = "llama-3.1-8b@h100"


@pytest.fixture(scope="module")
def round_robin() -> Any:
    deployment = Deployment(3, "round-robin", {"replica-1": {"http_500_rate": 1}})
    with start_engine(PROFILE, speedup=20, deployment=deployment) as engine:
        yield engine


@pytest.fixture(scope="module")
def prefix_aware() -> Any:
    with start_engine(PROFILE, speedup=20, deployment=Deployment(3, "prefix-aware")) as engine:
        yield engine


def post(url: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple:
    """Status, headers and JSON body of a non-streamed request."""
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read())


def chat(prompt: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "max_tokens": 4}


def series(url: str, name: str) -> dict[str, float]:
    """Every sample of a Prometheus series by its label text."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    pattern = rf"^{re.escape(name)}(\{{[^}}]*\}})? (\S+)$"
    return {m.group(1) or "": float(m.group(2)) for m in re.finditer(pattern, text, re.M)}


def served(engine: EngineProcess) -> dict[str, float]:
    """Requests each replica says it finished (its own ``vllm:request_success``)."""
    return {
        name: sum(series(url, "vllm:request_success_total").values())
        for name, url in engine.replicas().items()
    }


def test_round_robin_names_the_serving_replica_and_each_counts_its_own(round_robin) -> None:
    before = served(round_robin)
    replies = [post(round_robin.url, chat(f"hello {i}")) for i in range(6)]
    names = [headers["x-served-by"] for _, headers, _ in replies]
    assert names == ["replica-0", "replica-1", "replica-2"] * 2
    statuses = Counter((name, status) for name, (status, _, _) in zip(names, replies, strict=True))
    assert statuses == {("replica-0", 200): 2, ("replica-1", 500): 2, ("replica-2", 200): 2}
    after = served(round_robin)
    assert {n: after[n] - before[n] for n in after} == {
        "replica-0": 2,
        "replica-1": 0,  # its fault answered before any work
        "replica-2": 2,
    }
    decisions = series(round_robin.url, "slogate_router_requests_total")
    assert decisions['{reason="round-robin",replica="replica-0"}'] >= 2
    in_flight = series(round_robin.url, "slogate_router_requests_in_flight")
    assert set(in_flight.values()) == {0.0} and len(in_flight) == 3


def test_a_session_token_keeps_a_conversation_on_its_replica(round_robin) -> None:
    _, headers, _ = post(round_robin.url, chat("first turn"))
    home = headers["x-served-by"]
    token = headers["x-session-token"]
    assert token == session_token(home)
    later = [post(round_robin.url, chat("next"), {"x-session-token": token}) for _ in range(4)]
    assert {h["x-served-by"] for _, h, _ in later} == {home}


def test_the_session_cookie_keeps_a_conversation_on_its_replica_and_is_set_once(
    round_robin,
) -> None:
    """llm-d's later way: the token as the cookie ``llm-d-session``, set on a
    reply only when the request did not carry it already."""
    _, headers, _ = post(round_robin.url, chat("first turn"))
    home = headers["x-served-by"]
    (set_cookie,) = headers.get_all("Set-Cookie")
    assert set_cookie.startswith("llm-d-session=") and "HttpOnly" in set_cookie
    value = set_cookie.split(";")[0].split("=", 1)[1].strip('"')
    assert value == session_token(home)
    later = [
        post(round_robin.url, chat("next"), {"Cookie": f"llm-d-session={value}"}) for _ in range(4)
    ]
    assert {h["x-served-by"] for _, h, _ in later} == {home}
    assert all(h.get_all("Set-Cookie") is None for _, h, _ in later)  # it had the cookie


def test_each_replica_answers_on_its_own_port_with_its_name(round_robin) -> None:
    for name, url in round_robin.replicas().items():
        status, headers, _ = post(url, chat("direct"))
        assert headers["x-served-by"] == name
        assert status == (500 if name == "replica-1" else 200)
        assert len(series(url, "vllm:kv_cache_usage_perc")) == 1


def test_prefix_aware_routing_finds_the_cache_that_holds_the_prefix(prefix_aware) -> None:
    documents = [f"Document {d}: " + f"fact {d} " * 400 for d in range(3)]
    homes = {}
    for d, document in enumerate(documents):
        _, headers, reply = post(prefix_aware.url, chat(document + "question one"))
        homes[d] = headers["x-served-by"]
        assert reply["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert sorted(homes.values()) == ["replica-0", "replica-1", "replica-2"]
    for d, document in enumerate(documents):
        _, headers, reply = post(prefix_aware.url, chat(document + "question two"))
        assert headers["x-served-by"] == homes[d]
        cached = reply["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert cached > 0.8 * reply["usage"]["prompt_tokens"]
    decisions = series(prefix_aware.url, "slogate_router_requests_total")
    assert sum(v for k, v in decisions.items() if 'reason="prefix"' in k) == 3
    hits = {
        name: series(url, "vllm:prefix_cache_hits_total")
        for name, url in prefix_aware.replicas().items()
    }
    assert all(sum(h.values()) > 0 for h in hits.values())


def test_a_fault_for_a_replica_that_does_not_exist_is_refused() -> None:
    with pytest.raises(Exception, match="replica-7: no such replica"):
        start_engine(PROFILE, deployment=Deployment(3, replica_faults={"replica-7": {"x": 1}}))


def streamed_ttft(url: str, prompt: str) -> tuple[float, Any, int]:
    """Seconds to the first content chunk, the response's headers, the prompt's tokens."""
    body = {
        **chat(prompt),
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    start = time.perf_counter()
    first = None
    prompt_tokens = 0
    with urllib.request.urlopen(request, timeout=30) as response:
        for line in response:
            if not line.startswith(b"data: {"):
                continue
            chunk = json.loads(line[6:])
            if first is None and any(c["delta"].get("content") for c in chunk["choices"]):
                first = time.perf_counter() - start
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"]["prompt_tokens"]
        assert first is not None
        return first, response.headers, prompt_tokens


GBPS = 2.0  # a slow link: a 1,500-word prompt's KV takes about a third of a second


def test_disaggregated_ttft_includes_the_kv_transfer_to_the_decode_worker() -> None:
    """The same prompts through 1 prefill + 2 decode workers over a slow link
    and over a fast one: the first token comes later by the KV's bytes over
    the link. Over the fast link the first token comes about one prefill
    after the send, as from the prefill worker alone: the decode worker
    computed the prompt's last token, not the prompt again."""
    prompts = [f"case {i}: " + " ".join(f"w{i}x{j}" for j in range(1500)) for i in range(5)]
    ttfts = {}
    alone = {}
    for gbps in (GBPS, 10_000.0):
        tiers = Deployment(3, disaggregated=(1, 2))
        with start_engine(PROFILE, deployment=tiers, kv_transfer_gbps=gbps) as engine:
            urls = engine.replicas()
            assert sorted(urls) == ["decode-0", "decode-1", "prefill-0"]
            streamed_ttft(engine.url, "warm up the tokenizer")
            before = {n: series(u, "vllm:prompt_tokens_total") for n, u in urls.items()}
            runs = [streamed_ttft(engine.url, p) for p in prompts[:-1]]
            after = {n: series(u, "vllm:prompt_tokens_total") for n, u in urls.items()}
            alone[gbps] = streamed_ttft(urls["prefill-0"], prompts[-1])[0]
        grown = {n: sum(after[n].values()) - sum(before[n].values()) for n in urls}
        tokens = runs[0][2]
        # each tier counts the prompts it holds the KV of, as vLLM's instances do
        assert grown["prefill-0"] == sum(r[2] for r in runs)
        assert grown["decode-0"] + grown["decode-1"] == sum(r[2] for r in runs)
        assert {r[1]["x-prefilled-by"] for r in runs} == {"prefill-0"}
        assert {r[1]["x-served-by"] for r in runs} == {"decode-0", "decode-1"}
        ttfts[gbps] = statistics.median(r[0] for r in runs)
    profile = load_profile(PROFILE)
    transfer_s = kv_transfer_seconds(replace(profile, kv_transfer_gbps=GBPS), tokens)
    added = ttfts[GBPS] - ttfts[10_000.0]
    assert 0.8 * transfer_s < added < 1.3 * transfer_s + 0.05, (ttfts, transfer_s)
    assert ttfts[10_000.0] < 1.5 * alone[10_000.0], (ttfts, alone)
