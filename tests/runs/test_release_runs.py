"""`slogate run` against a local engine that never lets go of a request whose
client left: its running-requests gauge stays up, and the run says so (a
finding; the verdict stands)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import pytest
from httpserving import serving
from loadruns import ModelsHandler, slogate, summary

pytestmark = pytest.mark.slow
CHUNKS = 6


class LeakingEngine(ModelsHandler):
    """Streams six chunks 20 ms apart; counts a request running from its start
    to its end, and a request whose client left stays counted (vLLM's gauge
    name, so the run reads it as vLLM's)."""

    protocol_version = "HTTP/1.1"
    running: ClassVar[int] = 0
    lock: ClassVar[threading.Lock] = threading.Lock()

    def do_GET(self) -> None:
        if self.path != "/metrics":
            super().do_GET()
            return
        body = (
            "# TYPE vllm:num_requests_running gauge\n"
            f'vllm:num_requests_running{{model_name="m"}} {type(self).running}\n'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.load_request()
        if body is None:
            return
        with self.lock:
            type(self).running += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for i in range(CHUNKS):
                finish = "length" if i == CHUNKS - 1 else None
                self._event({"choices": [{"delta": {"content": "tok "}, "finish_reason": finish}]})
                time.sleep(0.02)
            self._event({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": CHUNKS}})
            self._send(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            return  # the client left: still counted as running, never released
        with self.lock:
            type(self).running -= 1

    def _event(self, obj: dict) -> None:
        self._send(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _send(self, event: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()


@contextmanager
def leaking_engine() -> Iterator[str]:
    LeakingEngine.running = 0
    with serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), LeakingEngine)) as port:
        yield f"http://127.0.0.1:{port}"


def test_a_server_that_keeps_closed_requests_is_a_finding(tmp_path: Path) -> None:
    scenario = tmp_path / "leak.yaml"
    scenario.write_text(
        "workload: {kind: chat, input_tokens: 16, output_tokens: 6, think_time_s: 0}\n"
        "load: {users: 2, duration: 3s}\n"
        "cancel: {share: 0.5, after_tokens: 2}\n"
        "slo: {ttft_ms: {p50: 5000}}\n"
    )
    with leaking_engine() as url:
        done = slogate("run", str(scenario), "--host", url, "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr[-3000:]  # a finding, not a failed run
    s = summary(tmp_path / "out")
    cancelled = s["scenarios"]["leak"]["requests"]["cancelled"]
    release = s["server_release"]
    assert cancelled > 0 and release["cancelled"] == cancelled
    assert release["released"] is False and release["running_before"] == 0
    assert release["running_after"] >= cancelled  # the leaked ones (and any cut at the stop)
    assert release["waited_s"] >= release["bound_s"] - 0.5
    [finding] = [f for f in s["diagnosis"] if f["cause"] == "server kept closed requests"]
    assert finding["evidence"]["released"] is False
    assert "NOT released" in (tmp_path / "out" / "summary.md").read_text()
    assert "Not released:" in (tmp_path / "out" / "report.html").read_text()
