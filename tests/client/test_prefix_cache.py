"""Prefix-cache hits as the client measures them: every API's reply read for
its cached prompt tokens, the counts merged exactly across processes, the
summary's token-weighted rate and TTFT of hits and misses, and the rate a
RAG-like workload measures against the simulated engine agreeing with the
engine's own vLLM-named counters."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from rag_prompts import rag_turns
from simprobe import engine_metrics
from streams import interpret

from slogate.analysis.documents.summary import prefix_cache_block
from slogate.analysis.measurement.recorder import SESSION_CACHE_HIT, Recorder
from slogate.analysis.measurement.records import ErrorKind, RequestRecord
from slogate.client import messages_stream, responses_stream
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios.model import RequestOptions, Timeouts

MS = 1_000_000
BLOCK = 16  # the simulated engine's default block size, as vLLM's


def sse(*objects: dict, named: bool = False) -> bytes:
    out = b""
    for obj in objects:
        if named:
            out += b"event: " + obj["type"].encode() + b"\n"
        out += b"data: " + json.dumps(obj).encode() + b"\n\n"
    return out


def chat_stream(usage: dict) -> bytes:
    text = {"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return sse(text, end, {"choices": [], "usage": usage}) + b"data: [DONE]\n\n"


def test_chat_usage_gives_the_cached_tokens() -> None:
    usage = {"prompt_tokens": 900, "completion_tokens": 1, "total_tokens": 901}
    record, _ = interpret(
        chat_stream({**usage, "prompt_tokens_details": {"cached_tokens": 864}}), 5
    )
    assert (record.input_tokens, record.cached_tokens) == (900, 864)
    # vLLM before 0.32 leaves the details out when nothing was cached: unknown here, 0 in the counts
    record, _ = interpret(chat_stream(usage), 5)
    assert (record.input_tokens, record.cached_tokens) == (900, None)
    record, _ = interpret(chat_stream({**usage, "prompt_tokens_details": None}), 5)
    assert record.cached_tokens is None


def test_responses_usage_gives_the_cached_tokens() -> None:
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "hi"}
    usage = {
        "input_tokens": 500,
        "output_tokens": 1,
        "input_tokens_details": {"cached_tokens": 496},
    }
    done = {"type": "response.completed", "response": {"status": "completed", "usage": usage}}
    record, _ = interpret(sse(delta, done, named=True), 7, responses_stream.parse_event)
    assert record.ok, record.error_message
    assert (record.input_tokens, record.cached_tokens) == (500, 496)


def test_messages_usage_gives_the_cache_read_tokens() -> None:
    usage = {"input_tokens": 20, "cache_read_input_tokens": 480, "output_tokens": 1}
    events = [
        {"type": "message_start", "message": {"usage": usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    record, _ = interpret(sse(*events, named=True), 11, messages_stream.parse_event)
    assert record.ok, record.error_message
    # Anthropic's input_tokens leaves out what was read from the cache
    assert (record.input_tokens, record.cached_tokens) == (500, 480)


def finished(ttft_ms: int, prompt: int, cached: int | None, conversation: int = 0) -> RequestRecord:
    record = RequestRecord("rag", start_ns=0, conversation=conversation)
    record.chunk_ns = [ttft_ms * MS, (ttft_ms + 10) * MS]
    record.chunk_chars = [4, 4]
    record.end_ns = (ttft_ms + 10) * MS
    record.output_tokens = 2
    record.input_tokens = prompt
    record.cached_tokens = cached
    return record


def test_the_rate_is_token_weighted_and_ttft_splits_on_a_hit() -> None:
    recorder = Recorder()
    recorder.record(finished(300, 1000, None), wall_s=1.0)  # a miss vLLM did not report
    recorder.record(finished(40, 1000, 992), wall_s=1.0)
    recorder.record(finished(50, 3000, 2000), wall_s=1.0)
    failed = finished(60, 500, 496).fail(ErrorKind.TRUNCATED, "cut", 70 * MS)
    recorder.record(failed, wall_s=1.0)  # failed: neither counted nor timed
    block = prefix_cache_block(recorder.bucket("rag", "all"))
    assert block is not None
    assert (block["reported"], block["requests"], block["hit_requests"]) == (2, 3, 2)
    assert (block["prompt_tokens"], block["cached_tokens"]) == (5000, 2992)
    assert block["hit_rate"] == pytest.approx(2992 / 5000)
    assert block["hit_request_share"] == pytest.approx(2 / 3)
    assert block["ttft_hit_ms"]["count"] == 2 and block["ttft_miss_ms"]["count"] == 1
    assert block["ttft_miss_ms"]["max"] == pytest.approx(300, rel=1e-3)
    assert block["ttft_hit_ms"]["max"] == pytest.approx(50, rel=1e-3)
    assert block["conversations"] is None  # no conversation reported its own rate


def test_a_server_that_never_says_has_no_rate() -> None:
    recorder = Recorder()
    recorder.record(finished(30, 1000, None), wall_s=1.0)
    assert prefix_cache_block(recorder.bucket("rag", "all")) is None


def test_counts_merge_exactly_from_workers_to_the_master() -> None:
    """Each worker drains its recorder into a payload; the master absorbs them:
    the master's block equals that of one recorder that saw every request."""
    records = [finished(20 + i, 800 + 16 * i, (16 * i) if i % 3 else None) for i in range(30)]
    single, master = Recorder(), Recorder()
    workers = [Recorder(), Recorder(), Recorder()]
    for i, record in enumerate(records):
        single.record(record, wall_s=1.0)
        workers[i % 3].record(record, wall_s=1.0)
    for i, worker in enumerate(workers):
        single.record_conversation_cache("rag", 100 * i, 1000)
        worker.record_conversation_cache("rag", 100 * i, 1000)
        master.absorb(worker.drain())
    merged = prefix_cache_block(master.bucket("rag", "all"))
    assert merged == prefix_cache_block(single.bucket("rag", "all"))
    assert merged is not None and merged["conversations"]["count"] == 3
    assert merged["conversations"]["max"] == pytest.approx(0.2)
    assert merged["conversations"]["min"] == 0.0


def test_a_conversation_rate_is_in_per_mille_and_warmup_is_left_out() -> None:
    recorder = Recorder()
    recorder.record_conversation_cache("chat", 1, 3)  # 333.3 per mille
    recorder.record_conversation_cache("chat", 5, 4)  # more than the prompt: capped
    recorder.record_conversation_cache("chat", 9, 9, warmup=True)
    recorder.record_conversation_cache("chat", 0, 0)  # no prompt known: no rate
    histogram = recorder.bucket("chat", "all").histograms.histogram(SESSION_CACHE_HIT)
    assert histogram.get_total_count() == 2
    assert (histogram.get_min_value(), histogram.get_max_value()) == (333, 1000)


# -- against the simulated engine ---------------------------------------------------------
@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    running = start_engine(speedup=8)
    try:
        yield running
    finally:
        running.stop()


def engine_counters(engine: EngineProcess) -> tuple[float, float]:
    """The engine's prefix-cache hits and queries (tokens), as /metrics says."""
    values = engine_metrics(engine.url)
    return values["vllm:prefix_cache_hits_total"], values["vllm:prefix_cache_queries_total"]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_client_rate_equals_the_engine_counters(engine: EngineProcess, api: str) -> None:
    """The simulated engine reports in each reply what it counts in
    vllm:prefix_cache_hits/queries: the client's sums are the counters' growth
    (both in whole blocks of the engine's block size)."""
    client = StreamClient(
        engine.url,
        api,  # type: ignore[arg-type]  # a parametrized str, one of the Api literals
        "meta-llama/Llama-3.1-8B-Instruct",
        RequestOptions(ignore_eos=True),
        Timeouts(first_token_s=30, stall_s=30),
        1,
    )
    hits_before, queries_before = engine_counters(engine)
    try:
        records = [client.send(turn).record for turn in rag_turns(9)]
    finally:
        client.close()
    hits_after, queries_after = engine_counters(engine)
    assert all(r.ok for r in records), [r.error_message for r in records]
    cached = [r.cached_tokens for r in records]
    assert all(c is not None and c % BLOCK == 0 for c in cached), cached
    assert sum(cached) == hits_after - hits_before
    assert sum(r.input_tokens for r in records) == queries_after - queries_before
    assert cached[0] < cached[-1]  # the shared instruction is cached after the first
    assert 0.3 < sum(cached) / sum(r.input_tokens for r in records) < 1.0
