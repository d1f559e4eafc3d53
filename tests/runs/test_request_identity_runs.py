"""Whole runs with request identity (docs/load.md, "Request identity"): the
server receives the ids the run records, a conversation is a trace, the
processes of a run share one, the simulated engine names its replies after
them, and the timeline page shows them and finds a pasted one."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from chromium import CHROMIUM, Browser
from httpserving import serving
from identified import assert_identified, saved_requests
from loadruns import ModelsHandler, scenario_file, slogate, summary
from timeline_page import hover_bar, search

from slogate.analysis.documents.rundata import RunData
from slogate.engines.simulated import start_engine

pytestmark = pytest.mark.slow
PROFILE = "llama-3.1-8b@h100"


class Recording(ModelsHandler):
    """A fake engine that keeps every streamed request's headers and names
    its reply ``srv-<n>``."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, str]]] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        if self.load_request() is None:
            return
        with self.lock:
            self.seen.append(dict(self.headers.items()))
            name = f"srv-{len(self.seen)}"
        self.stream(
            {"id": name, "choices": [{"delta": {"role": "assistant", "content": "a"}}]},
            {"id": name, "choices": [{"delta": {"content": "b"}, "finish_reason": "stop"}]},
            {"id": name, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
        )


@pytest.mark.parametrize("header", ["X-Correlation-Id", "off"])
def test_the_server_receives_the_ids_the_run_records(tmp_path: Path, header: str) -> None:
    Recording.seen = []
    scenario = scenario_file(tmp_path, "exact-chat", load={"users": 2, "spawn_rate": 2})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    with serving(server) as port:
        done = slogate("run", str(scenario), "--host", f"http://127.0.0.1:{port}",
                       "--duration", "2s", "--out", str(tmp_path / "out"), "--save-requests",
                       "--request-id-header", header,
                       "--tracestate", "congo=t61rcWkgMzE")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = saved_requests(tmp_path / "out")
    assert len(lines) == len(Recording.seen) > 4
    parents = {h["traceparent"]: h for h in Recording.seen}
    traces = set()
    for line in lines:
        received = parents[f"00-{line['trace_id']}-{line['span_id']}-01"]
        assert received["tracestate"] == "congo=t61rcWkgMzE"
        assert received.get("X-Correlation-Id") == (None if header == "off" else line["request_id"])
        assert "X-Request-Id" not in received
        assert_identified(line)
        assert line["engine_request_id"].startswith("srv-")
        traces.add(line["trace_id"])
    assert len(traces) == 1  # single-turn conversations: spans of the run's one trace
    assert len({line["engine_request_id"] for line in lines}) == len(lines)


@pytest.fixture(scope="module")
def simulated():
    with start_engine(PROFILE, speedup=4) as engine:
        yield engine


def multi_turn_run(tmp_path: Path, url: str) -> Path:
    scenario = scenario_file(
        tmp_path, "chat-turns",
        workload={"input_tokens": 64, "output_tokens": 8, "think_time_s": 0},
        load={"users": 3, "spawn_rate": 3},
    )  # fmt: skip
    out = tmp_path / "out"
    done = slogate("run", str(scenario), "--host", url, "--duration", "3s",
                   "--out", str(out), "--save-requests")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def test_against_the_simulated_engine_a_conversation_is_a_trace_its_reply_ids_match(
    simulated, tmp_path: Path
) -> None:
    lines = saved_requests(multi_turn_run(tmp_path, simulated.url))
    assert len(lines) > 12
    conversations: dict[tuple[int, int], set[str]] = {}
    for line in lines:
        assert line["engine_request_id"] == f"chatcmpl-{line['request_id']}"
        assert_identified(line)
        conversations.setdefault((line["user"], line["conversation"]), set()).add(line["trace_id"])
    assert all(len(traces) == 1 for traces in conversations.values())  # one trace each
    assert len({next(iter(t)) for t in conversations.values()}) == len(conversations)  # its own
    assert len({line["request_id"] for line in lines}) == len(lines)
    assert len({line["span_id"] for line in lines}) == len(lines)


def test_open_loop_processes_share_the_runs_one_trace(simulated, tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, "exact-open", load={"rate": {"rps": 20}})
    out = tmp_path / "out"
    done = slogate("run", str(scenario), "--host", simulated.url, "--duration", "6s",
                   "--processes", "2", "--out", str(out), "--save-requests")  # fmt: skip
    # 3: on a loaded machine the two processes may lag the schedule past the
    # bound (an invalid run); what each request was sent with is still recorded
    assert done.returncode in (0, 3), done.stderr[-2000:]
    lines = saved_requests(out)
    assert len(lines) > 10
    assert {line["trace_id"] for line in lines} == {summary(out)["run"]["trace_id"]}
    assert len({line["user"] >> 32 for line in lines}) == 2  # both processes sent
    assert all(line["engine_request_id"] == f"chatcmpl-{line['request_id']}" for line in lines)


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (tools/install-chromium.sh)")
def test_the_timeline_shows_a_requests_ids_and_finds_a_pasted_trace(
    simulated, tmp_path: Path
) -> None:
    out = multi_turn_run(tmp_path, simulated.url)
    recorded = RunData.load(out).timelines
    assert recorded is not None
    lines = saved_requests(out)
    kept = {recorded.row_ids(row).request_id for row in range(len(recorded))}
    saved = {line["request_id"] for line in lines}
    assert saved <= kept  # and the rest are those the run's end cut off, not saved
    assert len(kept - saved) == sum(recorded.flags["cut_off"])
    trace = lines[0]["trace_id"]
    in_trace = {line["request_id"] for line in lines if line["trace_id"] == trace}
    with Browser(tmp_path / "profile") as browser:
        browser.open((out / "timeline.html").as_uri())
        tip, row = hover_bar(browser, 2, "wait")
        assert f"request id {row[16]}" in tip and f"trace {row[17]} span {row[18]}" in tip
        assert f"engine's id chatcmpl-{row[16]}" in tip
        search(browser, trace.upper())
        found = browser.evaluate(
            "[...document.querySelectorAll('g.req.found')].map("
            "g => JSON.parse(document.getElementById('requests').textContent)[+g.dataset.i][16])"
        )
        assert set(found) == in_trace  # the conversation's every request, and only those
        said = browser.evaluate("document.getElementById('found').textContent")
        assert said.startswith(f"{len(in_trace)} of the ")
        search(browser, "no-such-id")
        assert "none of the" in browser.evaluate("document.getElementById('found').textContent")
        assert browser.errors == []
