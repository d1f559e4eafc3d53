"""Every request's identity (docs/load.md, "Request identity"): a request id
and a W3C traceparent go out as headers, the engine's id of its reply comes
back, and all of them reach requests.jsonl and the timeline page, where a
pasted id finds its requests."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import ClassVar

import pytest
from chromium import CHROMIUM, Browser
from httpserving import serving
from loadruns import ModelsHandler, cli, scenario_file, slogate

from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.records import RequestRecord
from slogate.analysis.measurement.request_metrics import request_metrics
from slogate.analysis.measurement.timelines import Timelines
from slogate.client.identity import Identity, new_trace_id
from slogate.engines.simulated import start_engine
from slogate.simengine.requests import reply_id

HEX32, HEX16 = re.compile(r"[0-9a-f]{32}"), re.compile(r"[0-9a-f]{16}")
PROFILE = "llama-3.1-8b@h100"


def header_lines(lines: bytes) -> dict[str, str]:
    pairs = [line.split(": ", 1) for line in lines.decode("latin-1").split("\r\n") if line]
    return {name: value for name, value in pairs}


def test_each_request_gets_its_own_id_and_span_in_the_runs_trace() -> None:
    trace = new_trace_id()
    identity = Identity(trace, tracestate="congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
    stamped = [identity.stamp() for _ in range(1000)]
    assert len({ids.request_id for ids, _ in stamped}) == 1000
    assert len({ids.span_id for ids, _ in stamped}) == 1000
    ids, lines = stamped[0]
    assert HEX32.fullmatch(ids.request_id) and HEX16.fullmatch(ids.span_id)
    assert header_lines(lines) == {
        "traceparent": f"00-{trace}-{ids.span_id}-01",
        "tracestate": "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",  # as given
        "X-Request-Id": ids.request_id,
    }
    own = new_trace_id()
    conversation, lines = identity.stamp(own)
    assert conversation.trace_id == own and header_lines(lines)["traceparent"].startswith(
        f"00-{own}-"
    )


def test_the_request_id_header_is_renamed_or_left_out_and_the_id_still_kept() -> None:
    ids, lines = Identity(new_trace_id(), header="X-Correlation-Id").stamp()
    assert header_lines(lines)["X-Correlation-Id"] == ids.request_id
    ids, lines = Identity(new_trace_id(), header=None).stamp()
    assert list(header_lines(lines)) == ["traceparent"] and HEX32.fullmatch(ids.request_id)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--tracestate", "Congo=x", "'Congo=x' is not a tracestate member"),
        ("--tracestate", "a=1,b", "'b' is not a tracestate member"),
        ("--tracestate", ",".join(f"k{i}=v" for i in range(33)), "33 members"),
        ("--request-id-header", "X Request", "'X Request' is not an HTTP header name"),
    ],
)
def test_a_bad_tracestate_or_header_name_stops_the_run_naming_the_flag(
    flag: str, value: str, message: str
) -> None:
    done = cli("run", "chat", "--host", "http://127.0.0.1:9", flag, value)
    assert done.returncode == 2
    assert flag in done.stderr and message in done.stderr


def test_the_simulated_engine_names_its_reply_after_the_request_id_as_vllm_does() -> None:
    assert reply_id("chat", "abc") == "chatcmpl-abc"
    assert reply_id("completions", "abc") == "cmpl-abc"
    assert reply_id("responses", "abc") != "resp_abc"  # vLLM's Responses API ignores it
    assert HEX32.fullmatch(reply_id("chat", None).removeprefix("chatcmpl-"))


def sent(request_id: str, engine_id: str | None) -> RequestRecord:
    record = RequestRecord("chat", 1_000_000, 9_000_000, chunk_ns=[5_000_000])
    record.request_id, record.trace_id, record.span_id = request_id, "ab" * 16, "cd" * 8
    record.engine_request_id = engine_id
    return record


def test_timelines_keep_each_rows_ids_through_merging_and_saving() -> None:
    rid = [f"{n:032x}" for n in range(1, 5)]
    worker = Timelines()
    for record in (sent(rid[0], f"chatcmpl-{rid[0]}"), sent(rid[1], "llama-7")):
        worker.add(record, request_metrics(record), 100.0, warmup=False)
    master = Timelines()
    master.add(sent(rid[2], None), request_metrics(sent(rid[2], None)), 99.0, warmup=False)
    master.add(sent(rid[3], f"chatcmpl-{rid[3]}"), request_metrics(sent(rid[3], "")), 99.0, False)
    master.extend(worker)
    saved = Timelines.decode(json.loads(json.dumps(master.encode())))
    engine_ids = [(ids.request_id, ids.engine_id) for ids in map(saved.row_ids, range(4)) if ids]
    assert engine_ids == [
        (rid[2], ""),
        (rid[3], f"chatcmpl-{rid[3]}"),
        (rid[0], f"chatcmpl-{rid[0]}"),
        (rid[1], "llama-7"),
    ]
    assert saved.engine_ids == ["chatcmpl-", "llama-7"]  # vLLM's form: one entry for the run
    assert saved.row_ids(0) is not None and saved.row_ids(0).trace_id == "ab" * 16
    older = master.encode()
    for key in ("ids", "engine_ids", "engine_id", "engine_tail"):
        del older[key]
    assert Timelines.decode(older).row_ids(0) is None  # saved before ids were kept
    with pytest.raises(ValueError, match="the ids cover 3 rows, not 4"):
        Timelines.decode({**master.encode(), "ids": master.ids[: 3 * 40].hex()})


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


def saved_requests(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("header", ["X-Correlation-Id", "off"])
def test_the_server_receives_the_ids_the_run_records(tmp_path: Path, header: str) -> None:
    import http.server

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
        assert HEX32.fullmatch(line["request_id"]) and line["engine_request_id"].startswith("srv-")
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


@pytest.mark.slow
def test_against_the_simulated_engine_a_conversation_is_a_trace_its_reply_ids_match(
    simulated, tmp_path: Path
) -> None:
    lines = saved_requests(multi_turn_run(tmp_path, simulated.url))
    assert len(lines) > 12
    conversations: dict[tuple[int, int], set[str]] = {}
    for line in lines:
        assert line["engine_request_id"] == f"chatcmpl-{line['request_id']}"
        assert HEX32.fullmatch(line["trace_id"]) and HEX16.fullmatch(line["span_id"])
        conversations.setdefault((line["user"], line["conversation"]), set()).add(line["trace_id"])
    assert all(len(traces) == 1 for traces in conversations.values())  # one trace each
    assert len({next(iter(t)) for t in conversations.values()}) == len(conversations)  # its own
    assert len({line["request_id"] for line in lines}) == len(lines)
    assert len({line["span_id"] for line in lines}) == len(lines)


@pytest.mark.slow
def test_open_loop_processes_share_the_runs_one_trace(simulated, tmp_path: Path) -> None:
    scenario = scenario_file(tmp_path, "exact-open", load={"rate": {"rps": 20}})
    out = tmp_path / "out"
    done = slogate("run", str(scenario), "--host", simulated.url, "--duration", "3s",
                   "--processes", "2", "--out", str(out), "--save-requests")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = saved_requests(out)
    assert len(lines) > 30
    assert len({line["trace_id"] for line in lines}) == 1
    assert len({line["user"] >> 32 for line in lines}) == 2  # both processes sent
    assert all(line["engine_request_id"] == f"chatcmpl-{line['request_id']}" for line in lines)


def search(browser: Browser, text: str) -> None:
    """Type ``text`` into the timeline's search box."""
    browser.evaluate(
        "(() => { const q = document.getElementById('query');"
        f" q.value = {json.dumps(text)}; q.dispatchEvent(new Event('input')); }})()"
    )


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (tools/install-chromium.sh)")
def test_the_timeline_shows_a_requests_ids_and_finds_a_pasted_trace(
    simulated, tmp_path: Path
) -> None:
    out = multi_turn_run(tmp_path, simulated.url)
    recorded = RunData.load(out).timelines
    assert recorded is not None
    lines = saved_requests(out)
    trace = lines[0]["trace_id"]
    in_trace = {line["request_id"] for line in lines if line["trace_id"] == trace}
    with Browser(tmp_path / "profile") as browser:
        browser.open((out / "timeline.html").as_uri())
        x, y, index = browser.evaluate(
            "(() => { const g = document.querySelectorAll('g.req')[2];"
            " const r = g.querySelector('rect.wait').getBoundingClientRect();"
            " return [r.x + r.width / 2, r.y + r.height / 2, +g.dataset.i]; })()"
        )
        browser.mouse("mouseMoved", x, y)
        tip = browser.wait_for(
            "document.getElementById('tip').style.display === 'block'"
            " && document.getElementById('tip').textContent"
        )
        rows = browser.evaluate("JSON.parse(document.getElementById('requests').textContent)")
        row = rows[index]
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
