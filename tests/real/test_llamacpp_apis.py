"""The Messages and embeddings APIs against a real engine: llama.cpp's
llama-server with SmolLM2-135M on the CPU, through slogate's own client.

llama-server answers the Anthropic Messages API on ``/v1/messages`` and, when
started with ``--embeddings``, embeddings on ``/v1/embeddings``. A build that
lacks a route is named in the skip reason; a route that answers must answer
right. Like ``test_llamacpp_e2e.py``: FAILS with the install command when the
engine is not installed, ``SLOGATE_SKIP_LLAMACPP=1`` opts out.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from llamaservers import llama_server

from slogate.analysis.measurement.records import ErrorKind
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.client.streaming import StreamClient
from slogate.engines.llamacpp import MODEL_ALIAS, LlamaServer
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts

# One worker runs them all: a second llama.cpp server would halve both.
pytestmark = [pytest.mark.llamacpp, pytest.mark.xdist_group("llamacpp")]

SLOTS = 2
TOKENS = 24
TURN = PlannedTurn("m", 0, 0, "Write a short poem about the sea.", TOKENS, 16, TOKENS, "Be brief.")
BATCH = PlannedTurn("e", 0, 0, "x", 1, 20, 0, inputs=("the sea", "a poem about it", "waves"))


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with llama_server(tmp_path_factory, SLOTS) as running:
        yield running


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with llama_server(tmp_path_factory, SLOTS, ("--embeddings", "--pooling", "mean")) as running:
        yield running


def send(url: str, api: str, turn: PlannedTurn, **options: object):
    client = StreamClient(
        url,
        api,  # type: ignore[arg-type]  # a parametrized str, one of the Api literals
        MODEL_ALIAS,
        RequestOptions(temperature=0, **options),  # type: ignore[arg-type]  # each its field's type
        Timeouts(first_token_s=60, stall_s=30),
        1,
    )
    try:
        return client.send(turn)
    finally:
        client.close()


def test_messages_api_streams_and_counts(llama: LlamaServer) -> None:
    result = send(llama.url, "messages", TURN, ignore_eos=True)
    rec = result.record
    assert rec.ok, rec.error_message
    assert rec.output_tokens is not None and 0 < rec.output_tokens <= TOKENS
    assert rec.input_tokens and rec.input_tokens > 10  # message_start usage
    assert rec.finish_reason in ("end_turn", "max_tokens")
    assert len(rec.chunk_ns) >= 2 and result.text
    m = request_metrics(rec)
    assert m.ttft_ns is not None and 0 < m.ttft_ns < m.e2e_ns
    assert m.answer.ttfa_ns == m.ttft_ns  # SmolLM2 does not reason


def test_messages_api_error_is_an_http_error(llama: LlamaServer) -> None:
    bad = {"messages": [{"role": "user", "content": 5}]}  # content must be text or blocks
    rec = send(llama.url, "messages", TURN, extra_body=bad).record
    assert rec.error is ErrorKind.HTTP_4XX
    assert rec.error_message == "HTTP 400: Expected 'content' to be a string or an array"


def test_embeddings_batch(embedder: LlamaServer) -> None:
    rec = send(embedder.url, "embeddings", BATCH).record
    assert rec.ok, rec.error_message
    assert rec.inputs == 3
    assert rec.input_tokens and rec.input_tokens >= 3
    assert request_metrics(rec).e2e_ns > 0
