"""Fault injection over HTTP: every kind, set at start and through /admin/faults."""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from simprobe import Probe, chat_body, completion_body, probe_many

from slogate.engines.simulated import EngineProcess, start_engine


@pytest.fixture(scope="module")
def engines() -> Any:
    with ThreadPoolExecutor(2) as pool:
        live = pool.submit(start_engine, "llama-3.1-8b@h100", speedup=4)
        preset = pool.submit(
            start_engine, "llama-3.1-8b@h100", speedup=4, faults={"http_503_rate": 1}
        )
        started = {"live": live.result(), "preset": preset.result()}
    yield started
    for engine in started.values():
        engine.stop()


@pytest.fixture
def engine(engines: Any) -> Any:
    live: EngineProcess = engines["live"]
    live.clear_faults()
    yield live
    live.clear_faults()


def stream(engine: EngineProcess, n: int = 1, tokens: int = 40) -> list[Probe]:
    return asyncio.run(
        probe_many(engine.url + "/v1/completions", [completion_body(16, tokens) for _ in range(n)])
    )


def gaps(result: Probe) -> list[float]:
    times = [t for t, _ in result.events]
    return [b - a for a, b in itertools.pairwise(times)]


@pytest.mark.parametrize(
    ("key", "status"), [("http_429_rate", 429), ("http_500_rate", 500), ("http_503_rate", 503)]
)
def test_http_errors(engine: EngineProcess, key: str, status: int) -> None:
    engine.set_faults(**{key: 1.0})
    result = stream(engine)[0]
    assert result.status == status
    assert json.loads(result.body)["error"]["code"] == status


def test_http_error_rate_is_a_probability(engine: EngineProcess) -> None:
    engine.set_faults(http_429_rate=0.5)
    statuses = [r.status for r in stream(engine, n=60, tokens=1)]
    assert 15 <= statuses.count(429) <= 45 and statuses.count(200) == 60 - statuses.count(429)


def test_error_event_mid_stream(engine: EngineProcess) -> None:
    engine.set_faults(stream_error_rate=1.0)
    result = stream(engine)[0]
    assert result.status == 200 and result.done and result.finish_reason is None
    errors = [obj for _, obj in result.chunks if "error" in obj]
    assert len(errors) == 1 and errors[0]["error"]["code"] == 500
    assert result.content_chunks  # some tokens came before the error


def test_stream_cut_without_done(engine: EngineProcess) -> None:
    engine.set_faults(stream_cut_rate=1.0)
    result = stream(engine)[0]
    assert result.status == 200 and not result.done and result.finish_reason is None
    assert result.error == "ClientPayloadError"  # the chunked body never ended
    assert 1 <= len(result.content_chunks) < 40


def test_stall_once(engine: EngineProcess) -> None:
    engine.set_faults(stall_s=0.4, stall_count=1)
    first, second = stream(engine), stream(engine)
    # the stall runs from the previous chunk's due instant: a chunk sent late by a
    # busy machine shortens the gap the client sees by that lateness
    assert max(gaps(first[0])) >= 0.39 and first[0].done
    assert max(gaps(second[0])) < 0.3


def test_stall_at_a_rate(engine: EngineProcess) -> None:
    engine.set_faults(stall_s=0.3, stall_rate=1.0)
    assert all(max(gaps(r)) >= 0.3 and r.done for r in stream(engine, n=3))


def test_malformed_chunk_then_the_stream_goes_on(engine: EngineProcess) -> None:
    engine.set_faults(malformed_rate=1.0)
    result = stream(engine)[0]
    assert result.malformed == 1 and result.done and result.usage["completion_tokens"] == 40


def test_slow_response_headers(engine: EngineProcess) -> None:
    engine.set_faults(header_delay_s=0.4, header_delay_rate=1.0)
    result = stream(engine)[0]
    assert result.headers_s >= 0.4 and result.done


def test_faults_in_non_streaming_replies(engine: EngineProcess) -> None:
    engine.set_faults(stream_error_rate=1.0)
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 20, "ignore_eos": True}
    result = asyncio.run(probe_many(engine.url + "/v1/chat/completions", [body]))[0]
    assert result.status == 500
    engine.set_faults(stream_error_rate=0.0, malformed_rate=1.0)
    result = asyncio.run(probe_many(engine.url + "/v1/chat/completions", [body]))[0]
    assert result.status == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(result.body)


def test_faults_set_at_start_and_cleared_at_runtime(engines: Any) -> None:
    preset: EngineProcess = engines["preset"]
    assert preset.admin("GET", "/admin/faults")["http_503_rate"] == 1.0
    result = asyncio.run(probe_many(preset.url + "/v1/chat/completions", [chat_body("hi", 3)]))[0]
    assert result.status == 503
    preset.clear_faults()
    result = asyncio.run(probe_many(preset.url + "/v1/chat/completions", [chat_body("hi", 3)]))[0]
    assert result.status == 200 and result.done


def test_admin_rejects_unknown_or_bad_settings(engine: EngineProcess) -> None:
    for body in ({"http_418_rate": 1}, {"stall_rate": 2}, {"stall_s": "long"}):
        request = urllib.request.Request(
            engine.url + "/admin/faults", data=json.dumps(body).encode(), method="POST"
        )
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=10)
        assert info.value.code == 400
    assert engine.admin("GET", "/admin/faults")["stall_rate"] == 0.0
