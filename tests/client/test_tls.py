"""Engines behind HTTPS: discovery and streaming over TLS against a real TLS
server on 127.0.0.1 (certificates from ``trustme``), keep-alive included, and
a clear error for a certificate the machine does not trust.

Over TLS the kernel's receive timestamps are not available (the bytes are
decrypted in user space): events are timed when the read returns.
"""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import statistics
import time
from collections.abc import Iterator

import pytest
import trustme
from httpserving import serving
from loadruns import ModelsHandler, slogate

from slogate.analysis.measurement.records import ErrorKind
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.client.engine_info import EngineUnreachable, discover
from slogate.client.streaming import StreamClient
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts

TTFT_S = 0.030
ITL_S = 0.020
TOKENS = 5
TURN = PlannedTurn("chat", 0, 0, "hello", TOKENS, 1, TOKENS)
MS = 1_000_000


class _SSEHandler(ModelsHandler):
    """A minimal OpenAI-style engine: a model list, and a stream of TOKENS
    chunks, the first TTFT_S after the request and then one every ITL_S."""

    protocol_version = "HTTP/1.1"
    OWNED_BY = "tls-test"
    connections = 0

    def setup(self) -> None:
        super().setup()
        # as real engines do; without it Nagle and delayed ACKs hold small writes
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        type(self).connections += 1

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        started = time.monotonic()
        self.start_stream()
        self.event(b'{"choices":[{"delta":{"role":"assistant"}}]}')
        for i in range(TOKENS):
            time.sleep(max(0.0, started + TTFT_S + i * ITL_S - time.monotonic()))
            self.event(b'{"choices":[{"delta":{"content":"word%d "}}]}' % i)
        self.event(b'{"choices":[{"delta":{},"finish_reason":"length"}]}')
        self.event(b'{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":%d}}' % TOKENS)
        self.event(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_engine(ca: trustme.CA) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SSEHandler)
    server.daemon_threads = True
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    with serving(server) as port:
        yield f"https://127.0.0.1:{port}"


@pytest.fixture
def trusted(ca: trustme.CA, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust the test CA the way a user trusts a private one."""
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))


def test_an_https_engine_is_discovered_and_streamed_with_keepalive(tls_engine, trusted) -> None:
    assert discover(tls_engine, None).owned_by == "tls-test"
    client = StreamClient(tls_engine, "chat", "m", RequestOptions(), Timeouts(), 1)
    assert not client.kernel_timestamps
    before = _SSEHandler.connections
    try:
        records = [client.send(TURN).record for _ in range(4)]
    finally:
        client.close()
    assert _SSEHandler.connections - before == 1  # one TLS connection, kept alive
    for record in records:
        assert record.ok, record.error_message
        assert record.output_tokens == len(record.chunk_ns) == TOKENS
    warm = [request_metrics(r) for r in records[1:]]  # the first also paid the handshake
    assert statistics.median(m.ttft_ns for m in warm) == pytest.approx(TTFT_S * 1e9, abs=5 * MS)
    itl = [gap for m in warm for gap, _ in m.itl_ns]
    assert statistics.median(itl) == pytest.approx(ITL_S * 1e9, abs=3 * MS)


def test_an_untrusted_certificate_is_a_clear_error(tls_engine, monkeypatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    with pytest.raises(EngineUnreachable, match=r"certificate verify failed.*SSL_CERT_FILE"):
        discover(tls_engine, None)
    client = StreamClient(tls_engine, "chat", "m", RequestOptions(), Timeouts(), 1)
    try:
        record = client.send(TURN).record
    finally:
        client.close()
    assert record.error is ErrorKind.CONNECT
    assert "CERTIFICATE_VERIFY_FAILED" in record.error_message


@pytest.mark.slow
def test_slogate_run_against_an_https_engine(tls_engine, trusted, tmp_path) -> None:
    out = tmp_path / "out"
    done = slogate("run", "tests/data/exact-chat.yaml", "--host", tls_engine, "--users", "2",
                   "--duration", "5s", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    chat = summary["scenarios"]["exact-chat"]
    assert summary["verdict"] == "pass"
    assert chat["requests"]["ok"] > 10 and chat["requests"]["failed"] == 0
    assert chat["tokens"]["output"] == TOKENS * chat["requests"]["ok"]
    assert chat["metrics"]["itl_ms"]["p50"] == pytest.approx(ITL_S * 1e3, abs=3)
    assert summary["run"]["engine"]["owned_by"] == "tls-test"
