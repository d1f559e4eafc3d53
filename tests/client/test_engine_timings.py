"""The engine's own timing of a request, read from its reply: llama.cpp's
``timings``, vLLM's per-request ``metrics``, the simulated engine's queue; a
value no timing can be is left unsaid."""

from __future__ import annotations

import orjson
import pytest

from slogate.analysis.measurement.records import RequestRecord
from slogate.client.engine_timings import EngineTimings, engine_timings
from slogate.client.openai_stream import StreamInterpreter

MS = 1_000_000
# llama-server's last chunks of a streamed chat completion, as the cached
# build sends them (docs/engines.md, "Per-request timings")
LLAMA_CHAT = [
    b'{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant",'
    b'"content":null}}],"id":"c1","object":"chat.completion.chunk"}',
    b'{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Al"}}],'
    b'"id":"c1","object":"chat.completion.chunk"}',
    b'{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"id":"c1",'
    b'"object":"chat.completion.chunk"}',
    b'{"choices":[],"id":"c1","object":"chat.completion.chunk","usage":{"completion_tokens":8,'
    b'"prompt_tokens":36,"total_tokens":44,"prompt_tokens_details":{"cached_tokens":0}},'
    b'"timings":{"cache_n":0,"prompt_n":36,"prompt_ms":162.65,"prompt_per_token_ms":4.518,'
    b'"prompt_per_second":221.33,"predicted_n":8,"predicted_ms":110.203,'
    b'"predicted_per_token_ms":15.74,"predicted_per_second":63.5}}',
    b"[DONE]",
]
# vLLM 0.32 with --enable-per-request-metrics: the usage chunk's ``metrics``
VLLM_USAGE = {
    "choices": [],
    "usage": {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24},
    "metrics": {
        "time_to_first_token_ms": 31.5,
        "generation_time_ms": 12.0,
        "queue_time_ms": 2.25,
        "mean_itl_ms": 4.0,
        "tokens_per_second": 90.1,
    },
}


def test_llama_cpp_timings_are_its_prefill_and_prompt_tokens_without_a_queue() -> None:
    final = orjson.loads(LLAMA_CHAT[3])
    assert engine_timings(final) == EngineTimings(None, 162.65, 36)


def test_vllm_metrics_are_its_queue_and_prefill() -> None:
    assert engine_timings(VLLM_USAGE) == EngineTimings(2.25, 31.5, None)


def test_the_simulated_engines_queue_rides_in_llama_cpps_timings() -> None:
    chunk = {"timings": {"queue_ms": 3.5, "prompt_n": 10, "prompt_ms": 7.25}}
    assert engine_timings(chunk) == EngineTimings(3.5, 7.25, 10)


@pytest.mark.parametrize(
    "timings",
    [
        {"prompt_ms": -1.0, "prompt_n": 3},
        {"prompt_ms": "12", "prompt_n": 3},
        {"prompt_n": 3},
        {"prompt_ms": float("nan")},
    ],
)
def test_a_prefill_time_that_cannot_be_one_is_unsaid(timings: dict) -> None:
    assert engine_timings({"timings": timings}) is None


def test_a_bad_queue_or_count_leaves_the_prefill() -> None:
    chunk = {"timings": {"queue_ms": -4, "prompt_ms": 5, "prompt_n": -2}}
    assert engine_timings(chunk) == EngineTimings(None, 5.0, None)


def test_a_llama_cpp_stream_fills_the_record_with_its_timings() -> None:
    record = RequestRecord("s", start_ns=0)
    reader = StreamInterpreter(record)
    for i, data in enumerate(LLAMA_CHAT):
        reader.on_data(data, (200 + i) * MS)
    assert record.ok and record.end_ns == 204 * MS
    assert (record.engine_queue_ms, record.engine_prefill_ms) == (None, 162.65)
    assert record.engine_prompt_tokens == 36 and record.input_tokens == 36
