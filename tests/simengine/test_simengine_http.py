"""The running engine over HTTP: prefill/decode phenomena, stream shapes, endpoints.

Engines run in child processes on 127.0.0.1 with port 0, as ``slogate run``
starts them; ``speedup`` shrinks the model clock so the file runs in seconds.
Latencies are compared with each other, never with absolute numbers, so a busy
machine does not fail the suite.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import statistics
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import pytest
from simprobe import Probe, chat_body, completion_body, probe, probe_many

from slogate.engines.simulated import EngineProcess, start_engine
from slogate.simengine.token_io import encode_text

pytestmark = pytest.mark.slow  # seven engine processes, and loads of seconds

ENGINES: dict[str, dict[str, Any]] = {
    "main": {"profile": "llama-3.1-8b@h100", "speedup": 2},
    "fp8": {"profile": "llama-3.1-8b@h100:fp8", "speedup": 2},
    "int4": {"profile": "llama-3.1-8b@h100:int4", "speedup": 2},
    "small_kv": {"profile": "llama-3.1-8b@h100", "speedup": 4, "num_gpu_blocks": 200},
    "interval": {"profile": "llama-3.1-8b@h100", "speedup": 4, "stream_interval": 4},
    "llama2": {"profile": "llama-2-7b@a100", "speedup": 8},
    "fast": {"profile": "llama-3.1-8b@h100", "speedup": 200},
}


@pytest.fixture(scope="module")
def engines() -> Any:
    with ThreadPoolExecutor(len(ENGINES)) as pool:
        futures = {name: pool.submit(start_engine, **spec) for name, spec in ENGINES.items()}
        started = {name: future.result() for name, future in futures.items()}
    yield started
    for engine in started.values():
        engine.stop()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def post(url: str, body: Any, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def metric(engine: EngineProcess, name: str) -> float:
    _, text = get(engine.url + "/metrics")
    match = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text.decode(), re.M)
    assert match, name
    return float(match.group(1))


def completions(engine: EngineProcess) -> str:
    return engine.url + "/v1/completions"


# -- prefill/decode phenomena ---------------------------------------------------------
def test_ttft_grows_with_prompt_length(engines: Any) -> None:
    url = completions(engines["main"])

    async def measure() -> list[float]:
        async with aiohttp.ClientSession() as session:
            ttfts = []
            for n in (128, 2048, 8192):
                result = await probe(session, url, completion_body(n, 2))
                ttfts.append(result.ttft_s)
            return ttfts

    short, medium, long = run(measure())
    assert short < medium < long
    assert long > 5 * short  # compute-bound prefill: ~64x the tokens


def test_tpot_is_nearly_flat_in_output_length(engines: Any) -> None:
    url = completions(engines["main"])

    async def measure() -> list[float]:
        async with aiohttp.ClientSession() as session:
            return [
                (await probe(session, url, completion_body(256, n))).tpot_s for n in (32, 128, 384)
            ]

    tpots = run(measure())
    assert max(tpots) < 1.3 * min(tpots)


def test_concurrency_raises_throughput_and_latency(engines: Any) -> None:
    url = completions(engines["main"])
    summary = []
    for concurrency in (1, 8, 32):
        start = time.perf_counter()
        results = run(probe_many(url, [completion_body(1000, 48) for _ in range(concurrency)]))
        elapsed = time.perf_counter() - start
        assert all(r.done for r in results)
        tokens = sum(r.usage["completion_tokens"] for r in results)
        summary.append(
            (
                tokens / elapsed,
                statistics.fmean(r.ttft_s for r in results),
                statistics.fmean(r.end_s for r in results),
            )
        )
    throughput, ttft, e2e = zip(*summary, strict=True)
    assert throughput[0] < throughput[1] < throughput[2]
    assert throughput[2] > 5 * throughput[0]
    assert ttft[0] < ttft[2] and e2e[0] < e2e[1] < e2e[2]


def test_exhausted_kv_cache_queues_requests_and_ttft_jumps(engines: Any) -> None:
    engine = engines["small_kv"]  # 200 blocks = 3,200 tokens
    url = completions(engine)
    waiting: list[float] = []

    async def scenario() -> list[Probe]:
        async def watch() -> None:
            while True:
                waiting.append(await asyncio.to_thread(metric, engine, "vllm:num_requests_waiting"))
                await asyncio.sleep(0.02)

        watcher = asyncio.create_task(watch())
        results = await probe_many(url, [completion_body(1000, 150) for _ in range(6)])
        watcher.cancel()
        return results

    results = run(scenario())
    assert all(r.done and r.usage["completion_tokens"] == 150 for r in results)
    assert max(waiting) > 0
    ttfts = sorted(r.ttft_s for r in results)
    assert ttfts[-1] > 3 * ttfts[0]  # the last ones waited for blocks
    assert metric(engine, "vllm:num_preemptions_total") > 0  # running ones outgrew the cache
    assert metric(engine, "vllm:kv_cache_usage_perc") == 0


def test_fp8_and_int4_weights_lower_tpot(engines: Any) -> None:
    async def tpot(name: str) -> float:
        async with aiohttp.ClientSession() as session:
            return (
                await probe(session, completions(engines[name]), completion_body(64, 96))
            ).tpot_s

    async def all_three() -> list[float]:
        return list(await asyncio.gather(tpot("main"), tpot("fp8"), tpot("int4")))

    bf16, fp8, int4 = run(all_three())
    assert fp8 < 0.8 * bf16
    assert int4 < 0.9 * fp8


def test_kv_cache_accounting_reproduces_the_worked_example(engines: Any) -> None:
    """Llama-2-7B fp16, batch 4, 4096 tokens each: about 8.6 GB of KV cache."""
    engine = engines["llama2"]
    engine.stats(reset=True)
    results = run(probe_many(completions(engine), [completion_body(4000, 96) for _ in range(4)]))
    assert all(r.done for r in results)
    stats = engine.stats()
    # 4 sequences x ceil(4095 computed tokens / 16) blocks x 16 tokens x 512 KiB
    assert stats["kv_peak_blocks"] == 4 * 256
    assert stats["kv_peak_bytes"] == 2 * 4 * 32 * 4096 * 4096 * 2 == 8_589_934_592


def test_prefix_caching_hits_on_a_repeated_prompt(engines: Any) -> None:
    engine = engines["main"]
    prompt = " ".join(f"word{i}" for i in range(3000))
    hits_before = metric(engine, "vllm:prefix_cache_hits_total")

    async def twice() -> list[Probe]:
        async with aiohttp.ClientSession() as session:
            url = engine.url + "/v1/chat/completions"
            return [
                await probe(session, url, chat_body(prompt, 4, ignore_eos=True)) for _ in range(2)
            ]

    cold, warm = run(twice())
    assert metric(engine, "vllm:prefix_cache_hits_total") - hits_before > 3000
    assert warm.ttft_s < 0.5 * cold.ttft_s


# -- stream shapes ----------------------------------------------------------------------
def test_chat_stream_has_vllm_shape(engines: Any) -> None:
    engine = engines["main"]
    messages = [{"role": "user", "content": "Explain the KV cache in two sentences."}]
    body = {**chat_body("", 40, ignore_eos=True), "messages": messages}
    result = run(probe_many(engine.url + "/v1/chat/completions", [body]))[0]
    chunks = [obj for _, obj in result.chunks]
    assert result.status == 200 and result.done and result.malformed == 0
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("role" not in c["choices"][0]["delta"] for c in chunks[1:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 40
    assert len({c["id"] for c in chunks}) == 1
    _, tokenized = post(engine.url + "/tokenize", {"messages": messages})
    assert chunks[-1]["usage"]["prompt_tokens"] == tokenized["count"]
    # text that reads like text and re-tokenizes to about the reported count
    assert len(result.text.split()) >= 15 and re.search(r"[a-z]{3,} [a-z]{2,}", result.text)
    assert abs(len(encode_text(result.text)) - 40) <= 3


def test_completion_stream_and_continuous_usage(engines: Any) -> None:
    body = completion_body(
        20, 12, stream_options={"include_usage": True, "continuous_usage_stats": True}
    )
    result = run(probe_many(completions(engines["main"]), [body]))[0]
    chunks = [obj for _, obj in result.chunks]
    assert chunks[0]["object"] == "text_completion" and "text" in chunks[0]["choices"][0]
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 12
    assert all(c["usage"]["prompt_tokens"] == 20 for c in chunks)


def test_stream_interval_packs_tokens_per_chunk(engines: Any) -> None:
    body = completion_body(
        20, 21, stream_options={"include_usage": True, "continuous_usage_stats": True}
    )
    result = run(probe_many(completions(engines["interval"]), [body]))[0]
    counts = [obj["usage"]["completion_tokens"] for _, obj in result.chunks if obj["choices"]]
    steps = [b - a for a, b in itertools.pairwise([0, *counts])]
    # The first token at once, then 4 per chunk; a handler that wakes late merges
    # what is pending into its chunk, as vLLM does with a lagging client.
    assert steps[0] == 1 and sum(steps) == 21
    assert all(n >= 4 for n in steps[1:]) and steps.count(4) >= 3


def test_eos_makes_lengths_vary_and_min_tokens_holds(engines: Any) -> None:
    url = engines["main"].url + "/v1/completions"
    bodies = [
        {"prompt": "Once upon a time", "max_tokens": 300, "min_tokens": 30} for _ in range(16)
    ]

    replies = [json.loads(r.body) for r in run(probe_many(url, bodies))]
    lengths = [r["usage"]["completion_tokens"] for r in replies]
    assert len(set(lengths)) >= 4 and min(lengths) >= 31 and max(lengths) <= 300
    for reply, n in zip(replies, lengths, strict=True):
        assert reply["choices"][0]["finish_reason"] == ("length" if n == 300 else "stop")


def test_non_stream_responses(engines: Any) -> None:
    engine = engines["main"]
    status, chat = post(
        engine.url + "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 10, "ignore_eos": True},
    )
    assert status == 200 and chat["object"] == "chat.completion"
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert len(chat["choices"][0]["message"]["content"]) > 10
    assert (
        chat["usage"]["completion_tokens"] == 10 and chat["choices"][0]["finish_reason"] == "length"
    )
    status, text = post(
        completions(engine), {"prompt": [5, 6, 7], "max_tokens": 5, "ignore_eos": True}
    )
    assert status == 200 and text["object"] == "text_completion"
    assert text["usage"] == {
        "prompt_tokens": 3,
        "total_tokens": 8,
        "completion_tokens": 5,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


async def generating(engine: EngineProcess, timeout_s: float = 10.0) -> None:
    """Returns once the engine reports a running request."""
    deadline = time.monotonic() + timeout_s
    while await asyncio.to_thread(metric, engine, "vllm:num_requests_running") < 1:
        assert time.monotonic() < deadline, "no request started generating"
        await asyncio.sleep(0.005)


def test_short_steps_still_leave_time_to_serve_requests(engines: Any) -> None:
    """At speedup 200 a decode step lasts ~40 us of wall time; the engine loop must
    still yield between steps, or no other request is served until it idles."""
    engine = engines["fast"]
    long = {"prompt": [1, 2, 3], "max_tokens": 30000, "ignore_eos": True}

    async def scenario() -> tuple[float, float]:
        async with aiohttp.ClientSession() as session:
            start = time.perf_counter()
            task = asyncio.create_task(probe(session, completions(engine), long))
            await generating(engine)
            async with session.get(engine.url + "/health") as response:
                assert response.status == 200
            health = time.perf_counter() - start
            result = await task
            assert json.loads(result.body)["usage"]["completion_tokens"] == 30000
            return health, time.perf_counter() - start

    health, total = run(scenario())
    assert health < total / 2


# -- other endpoints and errors ---------------------------------------------------------
def test_models_health_tokenize(engines: Any) -> None:
    engine = engines["main"]
    status, body = get(engine.url + "/v1/models")
    card = json.loads(body)["data"][0]
    assert status == 200 and card["id"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert card["owned_by"] == "slogate-simengine" and card["max_model_len"] == 131072
    assert get(engine.url + "/health")[0] == 200
    status, tokens = post(engine.url + "/tokenize", {"prompt": "Hello world"})
    assert status == 200 and tokens["count"] == len(tokens["tokens"]) == 2
    assert tokens["max_model_len"] == 131072
    _, chat = post(
        engine.url + "/tokenize", {"messages": [{"role": "user", "content": "Hello world"}]}
    )
    assert chat["count"] > tokens["count"]  # the chat template's framing


def test_metrics_use_vllm_names(engines: Any) -> None:
    engine = engines["main"]
    before = metric(engine, "vllm:generation_tokens_total")
    post(completions(engine), {"prompt": [1, 2, 3], "max_tokens": 7, "ignore_eos": True})
    _, text = get(engine.url + "/metrics")
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:num_preemptions_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
    ):
        assert name in text.decode(), name
    assert metric(engine, "vllm:generation_tokens_total") == before + 7


@pytest.mark.parametrize(
    ("path", "body", "status", "kind"),
    [
        ("/v1/completions", {"prompt": "x", "model": "nope"}, 404, "NotFoundError"),
        ("/v1/completions", {"prompt": [1] * 131000, "max_tokens": 1000}, 400, "BadRequestError"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 0}, 400, "BadRequestError"),
        (
            "/v1/completions",
            {"prompt": "x", "max_tokens": 5, "min_tokens": 9},
            400,
            "BadRequestError",
        ),
        ("/v1/chat/completions", {"messages": []}, 400, "BadRequestError"),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "x"}], "n": 2},
            400,
            "BadRequestError",
        ),
    ],
)
def test_bad_requests_get_openai_errors(
    engines: Any, path: str, body: Any, status: int, kind: str
) -> None:
    got, reply = post(engines["main"].url + path, body)
    assert got == status and reply["error"]["type"] == kind and reply["error"]["code"] == status


def test_invalid_json_is_a_400(engines: Any) -> None:
    status, reply = post(completions(engines["main"]), None, raw=b"{not json")
    assert status == 400 and "JSON" in reply["error"]["message"]
