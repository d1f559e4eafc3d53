"""The client's TTFT and the simulated engine's own agree on every API.

The client times a request from the moment it starts sending it to the first
output chunk it receives (the measurement contract in docs/design.md); the
engine logs TTFT (``vllm:time_to_first_token_seconds``) from the moment the
request's first bytes were read to the moment its first token's bytes were
handed to the socket. What is left between the two is the loopback transfer
both ways and the client's reading: for requests sent one at a time at
speedup 1, well under the stated bound. Whole runs of many users are compared
in tests/runs/test_api_runs.py.
"""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator

import orjson
import pytest

from slogate.analysis.engine_side.server_metrics import parse_samples
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.client.streaming import StreamClient
from slogate.engines.simulated import EngineProcess, start_engine
from slogate.scenarios.model import Api, PlannedTurn, RequestOptions, Timeouts

pytestmark = pytest.mark.slow

REQUESTS = 20
# client mean TTFT minus the engine's, one request at a time: measured 0.39-0.69 ms with
# the machine's load average at 6 (2.7-4.3 ms when the engine's clock started after its
# own tokenizing, 0.9-1.8 ms when it started at its handler and ended with the step)
BOUND_MS = 1.0
TURN = PlannedTurn("s", 0, 0, "a question of some length " * 100, 16, 500, 16)
APIS: list[Api] = ["chat", "completions", "responses", "messages"]


@pytest.fixture(scope="module")
def engine() -> Iterator[EngineProcess]:
    running = start_engine("llama-3.1-8b@h100", speedup=1)
    try:
        yield running
    finally:
        running.stop()


def engine_ttft_s(engine: EngineProcess) -> tuple[float, float]:
    """(sum of seconds, count) of the engine's TTFT histogram."""
    with urllib.request.urlopen(engine.url + "/metrics", timeout=10) as response:
        samples = {s.name: s.value for s in parse_samples(response.read().decode())}
    name = "vllm:time_to_first_token_seconds"
    return samples[f"{name}_sum"], samples[f"{name}_count"]


@pytest.mark.parametrize("api", APIS)
def test_client_and_engine_ttft_agree(engine: EngineProcess, api: Api) -> None:
    model = "meta-llama/Llama-3.1-8B-Instruct"
    client = StreamClient(engine.url, api, model, RequestOptions(ignore_eos=True), Timeouts(), 1)
    try:
        client.send(TURN)  # connects; tokenizer and code paths warm
        sum0, count0 = engine_ttft_s(engine)
        ttfts = []
        for _ in range(REQUESTS):
            record = client.send(TURN).record
            assert record.ok, record.error_message
            ttfts.append(request_metrics(record).ttft_ns / 1e6)
        sum1, count1 = engine_ttft_s(engine)
    finally:
        client.close()
    assert count1 - count0 == REQUESTS
    engine_ms = (sum1 - sum0) / REQUESTS * 1e3
    client_ms = sum(ttfts) / REQUESTS
    # the client can only see the first token after the engine made it
    assert 0 <= client_ms - engine_ms <= BOUND_MS, (client_ms, engine_ms)


def streamed_over(sock: socket.socket, head: bytes, rest: bytes, pause_s: float) -> None:
    """Send a request in two parts ``pause_s`` apart and read its streamed reply to its end."""
    sock.sendall(head)
    time.sleep(pause_s)
    sock.sendall(rest)
    reply = b""
    while not reply.endswith(b"0\r\n\r\n"):  # the chunked body's last chunk
        piece = sock.recv(65536)
        assert piece, reply[-500:]
        reply += piece
    assert b"[DONE]" in reply, reply[:500]


def test_the_engines_ttft_starts_at_the_requests_first_bytes(engine: EngineProcess) -> None:
    """A request whose headers arrive slowly is timed from its first byte, as a
    client times it from its send; the next request on the same connection,
    sent after an idle pause, from its own first byte."""
    body = orjson.dumps(
        {"prompt": "a question", "max_tokens": 4, "ignore_eos": True, "stream": True}
    )
    request = (
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    pause_s = 0.3
    port = int(engine.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sum0, count0 = engine_ttft_s(engine)
        streamed_over(sock, request[:20], request[20:], pause_s)
        sum1, count1 = engine_ttft_s(engine)
        time.sleep(pause_s)  # idle on the open connection: not part of the next request
        streamed_over(sock, request, b"", 0.0)
        sum2, count2 = engine_ttft_s(engine)
    assert count1 - count0 == 1 and count2 - count1 == 1
    assert sum1 - sum0 >= pause_s
    assert sum2 - sum1 < pause_s / 3
