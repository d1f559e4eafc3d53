"""Reliability: the streaming client and whole runs against servers that
misbehave on purpose (slogate.exactengine.misbehave), on 127.0.0.1. Each fault
ends on time, with the documented error kind and exit code (docs/reliability.md)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import gevent
import psutil
import pytest
from loadruns import scenario_file, slogate, summary

from slogate.analysis.documents.frames import read_frames
from slogate.analysis.documents.journal import JOURNAL_FILE, KILLED_REASON, TICK
from slogate.analysis.documents.rundata import DATA_DIR, RunData
from slogate.analysis.measurement.records import ErrorKind
from slogate.analysis.measurement.timelines import UNKNOWN
from slogate.client.streaming import StreamClient
from slogate.exactengine.misbehave import MisbehavingServer
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts

TURN = PlannedTurn("chat", 0, 0, "hello there", 8, 4, 8)
TIMEOUTS = Timeouts(connect_s=2.0, first_token_s=1.5, stall_s=1.0)


def send_to(kind: str, timeouts: Timeouts = TIMEOUTS):
    """One request to a fresh server of fault ``kind``; the record, the seconds it
    took, and how many 10 ms ticks another greenlet got meanwhile."""
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        while True:
            gevent.sleep(0.01)
            ticks += 1

    with MisbehavingServer(kind) as server:
        client = StreamClient(server.url, "chat", "m", RequestOptions(), timeouts, 2)
        ticker = gevent.spawn(tick)
        start = time.monotonic()
        try:
            record = client.send(TURN).record
        finally:
            took = time.monotonic() - start
            ticker.kill()
            client.close()
    return record, took, ticks


def test_a_keepalive_flood_times_out_and_never_starves_other_greenlets() -> None:
    record, took, ticks = send_to("keepalive-flood")
    assert record.error is ErrorKind.TIMEOUT_FIRST_TOKEN, record.error_message
    assert took < TIMEOUTS.first_token_s + 2.0
    # before the fix the read loop never yielded: the ticker got no turn at all
    assert ticks >= 10


PATIENT = Timeouts(connect_s=2.0, first_token_s=60.0, stall_s=60.0)


def test_a_data_flood_without_blank_lines_is_a_bounded_protocol_error() -> None:
    """With timeouts far off, only the event bound can end it (before the fix:
    6 GB after 20 s)."""
    record, took, ticks = send_to("data-flood", PATIENT)
    assert record.error is ErrorKind.PROTOCOL
    assert "grew past 1048576 bytes" in record.error_message
    assert took < PATIENT.first_token_s / 2
    assert ticks >= 1


def test_a_1_gb_event_is_refused_at_the_event_bound() -> None:
    record, took, _ = send_to("huge-event", PATIENT)
    assert record.error is ErrorKind.PROTOCOL
    assert "grew past 1048576 bytes" in record.error_message
    assert took < PATIENT.first_token_s / 2


def test_a_stream_of_only_done_is_empty_not_ok() -> None:
    record, _, _ = send_to("done-only")
    assert record.error is ErrorKind.EMPTY
    assert not record.chunk_ns


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("reset", ErrorKind.CONNECT),
        ("headers-only", ErrorKind.TIMEOUT_FIRST_TOKEN),
        ("clock-jump", None),
    ],
)
def test_other_faults_give_their_error_kind(kind: str, error: ErrorKind | None) -> None:
    record, took, _ = send_to(kind)
    assert record.error is error, record.error_message
    assert took < TIMEOUTS.first_token_s + 2.0
    if error is None:
        assert len(record.chunk_ns) == 7  # timed by arrival, the server's clock ignored


def test_an_endless_stream_runs_until_its_stall_or_the_run_ends() -> None:
    """Valid output forever: no timeout applies, so only the run's end stops it;
    the client itself stays responsive (the run-level test ends it)."""
    with MisbehavingServer("endless") as server:
        client = StreamClient(server.url, "chat", "m", RequestOptions(), TIMEOUTS, 1)
        sender = gevent.spawn(client.send, TURN)
        gevent.sleep(1.0)
        assert not sender.dead
        sender.kill(block=True, timeout=2)
        client.close()
    assert sender.dead


def run_against(tmp_path: Path, kind: str, duration: str = "4s", *options: str, **request: object):
    """``slogate run`` of a small chat load against fault ``kind`` (with run
    ``options``): its process, the seconds it took, and its results folder."""
    scenario = scenario_file(
        tmp_path,
        "exact-chat",
        load={"users": 2, "spawn_rate": 2, "duration": duration},
        timeouts={"connect": "2s", "first_token": "2s", "stall": "1s"},
        request={"ignore_eos": True, **request},
    )
    out = tmp_path / "out"
    with MisbehavingServer(kind) as server:
        start = time.monotonic()
        done = slogate(
            "run", str(scenario), "--host", server.url, "--out", str(out), *options, timeout=120
        )
        took = time.monotonic() - start
    return done, took, out


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["keepalive-flood", "data-flood", "done-only"])
def test_a_run_against_a_flooding_or_empty_server_ends_on_time_and_does_not_pass(
    tmp_path: Path, kind: str
) -> None:
    done, took, out = run_against(tmp_path, kind)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert took < 4 + 2 + 10 + 15  # duration + largest timeout + 10 s, + process start-up
    scenario = summary(out)["scenarios"]["exact-chat"]
    assert scenario["requests"]["ok"] == 0
    assert scenario["requests"]["failed"] >= 1


@pytest.mark.slow
def test_error_samples_of_timeouts_are_not_masked_as_secrets(tmp_path: Path) -> None:
    done, _, out = run_against(tmp_path, "headers-only", duration="8s")
    assert done.returncode == 3, done.stderr[-2000:]
    samples = summary(out)["scenarios"]["exact-chat"]["requests"]["error_samples"]
    assert set(samples) == {"timeout_first_token"}, samples
    assert set(samples["timeout_first_token"]) == {"no output within 2 s"}


def test_a_key_straddling_the_message_cut_is_masked_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-" + "k" * 600  # echoed after 19 characters: it straddles the 500-character cut
    monkeypatch.setenv("LONG_KEY", key)
    with MisbehavingServer("echo-auth") as server:
        client = StreamClient(
            server.url, "chat", "m", RequestOptions(api_key_env="LONG_KEY"), TIMEOUTS, 1
        )
        record = client.send(TURN).record
        client.close()
    assert record.error is ErrorKind.HTTP_4XX
    assert record.error_message == "HTTP 401: invalid key Bearer ***"


def test_discovery_sends_only_the_scenarios_key_and_masks_its_echo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other, mine = "sk-another-service-0123456789", "engine-key-9876543210"
    monkeypatch.setenv("OPENAI_API_KEY", other)
    monkeypatch.setenv("ENGINE_KEY", mine)
    scenario = scenario_file(tmp_path, "exact-chat", request={"api_key_env": "ENGINE_KEY"})
    with MisbehavingServer("echo-auth", models_fault=True) as server:
        done = slogate("run", str(scenario), "--host", server.url, "--out", str(tmp_path / "o"))
    assert done.returncode == 3, done.stderr
    assert server.auth_seen == [b"Bearer " + mine.encode()]
    assert "HTTP 401" in done.stderr
    assert mine not in done.stderr and other not in done.stderr
    assert "***" in done.stderr


def start_run(tmp_path: Path, server: MisbehavingServer, duration: str = "60s"):
    """A long ``slogate run`` in the background; its process and results folder."""
    scenario = scenario_file(
        tmp_path, "exact-chat", load={"users": 2, "spawn_rate": 2, "duration": duration}
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "slogate.cli", "run", str(scenario)]
    command += ["--host", server.url, "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 90
    while not journal_flushed(out):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.2)
    return process, out


def journal_flushed(out: Path) -> bool:
    """The run's journal holds a whole flush (its first is a second after the start)."""
    path = out / DATA_DIR / JOURNAL_FILE
    return path.is_file() and TICK in {kind for kind, _ in read_frames(path.read_bytes()).frames}


def settled(server: MisbehavingServer, quiet_s: float = 2.0) -> int:
    """The count of requests served once no new one came for ``quiet_s``."""
    seen = server.served
    while True:
        time.sleep(quiet_s)
        if server.served == seen:
            return seen
        seen = server.served


@pytest.mark.slow
def test_sigkill_of_slogate_run_stops_the_load_and_leaves_a_judged_folder(
    tmp_path: Path,
) -> None:
    with MisbehavingServer("clock-jump") as server:
        process, out = start_run(tmp_path, server)
        process.kill()
        process.wait()
        killed_at = time.monotonic()
        time.sleep(5.0)  # the load must stop within 5 s of the kill
        after_5s = server.served
        assert settled(server) == after_5s
        assert time.monotonic() - killed_at < 30
    report = slogate("report", str(out))
    assert report.returncode == 3, report.stderr
    summary_doc = summary(out)
    assert summary_doc["run"]["complete"] is False
    assert summary_doc["scenarios"]["exact-chat"]["requests"]["ok"] >= 1


@pytest.mark.slow
def test_against_a_host_the_command_waits_for_locust_without_the_rest_of_slogate(
    tmp_path: Path,
) -> None:
    """While Locust runs, ``slogate run`` is the small waiter it exec'd into (same
    pid, Locust its child): none of what validating the run imported stays mapped."""
    with MisbehavingServer("clock-jump") as server:
        process, out = start_run(tmp_path, server, duration="4s")
        waiter = psutil.Process(process.pid)
        try:
            assert waiter.cmdline()[1:3] == ["-m", "slogate.waiter"]
            assert any("locust" in " ".join(c.cmdline()) for c in waiter.children())
            mapped = {m.path for m in waiter.memory_maps()}
            assert not [p for p in mapped if "numpy" in p or "tokenizers" in p], mapped
        finally:
            _, stderr = process.communicate(timeout=60)
    assert process.returncode in (0, 1, 4), stderr  # judged by Locust, passed on as is
    assert summary(out)["run"]["complete"] is True


@pytest.mark.slow
def test_sigkill_of_locust_leaves_its_journal_judged_incomplete(tmp_path: Path) -> None:
    """The journal is flushed every second: the requests the server had answered
    2.5 s before the kill are all in the folder the kill leaves."""
    with MisbehavingServer("clock-jump") as server:
        process, out = start_run(tmp_path, server)
        time.sleep(1.0)
        answered, answered_at = server.served, time.time()
        time.sleep(2.5)
        killed_at = time.time()
        for child in psutil.Process(process.pid).children(recursive=True):
            child.kill()
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 3, stderr
    assert "run failed: the Locust process was killed by signal 9" in stderr
    assert "Traceback" not in stderr
    summary_doc = summary(out)
    assert summary_doc["verdict"] == "invalid"
    assert "killed" in summary_doc["run"]["incomplete_reason"]
    assert (out / "report.html").is_file()
    assert not (out / DATA_DIR / "run.json").exists()  # judged from the journal alone
    counters = RunData.load(out).overall("exact-chat").counters
    users = 2  # at most this many requests were still streaming when counted
    assert counters.total >= answered - users > 0
    assert answered_at < counters.last_end_s < killed_at
    assert summary_doc["scenarios"]["exact-chat"]["requests"]["ok"] == counters.ok
    report = slogate("report", str(out))
    assert report.returncode == 3, report.stderr


@pytest.mark.slow
def test_a_finished_runs_journal_replays_to_its_final_save(tmp_path: Path) -> None:
    """The journal's last flush carries the final data: alone, it loads as the
    final save does (all but the scraped server metrics, which it does not hold).
    A later run killed in the same folder is not judged from this one's save."""
    with MisbehavingServer("clock-jump") as server:
        process, out = start_run(tmp_path, server, duration="3s")
        _, stderr = process.communicate(timeout=60)
    assert process.returncode in (0, 1, 4), stderr
    alone = tmp_path / "journal-only" / DATA_DIR
    alone.mkdir(parents=True)
    shutil.copy(out / DATA_DIR / JOURNAL_FILE, alone / JOURNAL_FILE)
    final, replayed = RunData.load(out), RunData.load(alone.parent)
    assert replayed.meta == final.meta and final.meta["complete"] is True
    assert replayed.timeseries == final.timeseries and final.timeseries
    assert {k: b.encode() for k, b in replayed.buckets.items()} == {
        k: b.encode() for k, b in final.buckets.items()
    }
    assert final.overall("exact-chat").counters.ok > 0
    # the folder reused by a run that is killed: judged from that run's journal
    (out / DATA_DIR / JOURNAL_FILE).unlink()
    with MisbehavingServer("clock-jump") as server:
        process, out = start_run(tmp_path, server)
        for pid in [process.pid] + [c.pid for c in psutil.Process(process.pid).children(True)]:
            os.kill(pid, signal.SIGKILL)
        process.communicate(timeout=60)
    assert RunData.load(out).meta["incomplete_reason"] == KILLED_REASON


@pytest.mark.slow
def test_sigkill_of_every_process_leaves_a_journal_that_report_judges(tmp_path: Path) -> None:
    """Nothing is left to judge the run: the folder holds only the journal, and
    ``slogate report`` rebuilds the data from it, incomplete (exit 3)."""
    with MisbehavingServer("clock-jump") as server:
        process, out = start_run(tmp_path, server)
        time.sleep(1.5)
        everyone = [process.pid] + [c.pid for c in psutil.Process(process.pid).children(True)]
        for pid in everyone:
            os.kill(pid, signal.SIGKILL)
        process.communicate(timeout=60)
        answered = server.served
    assert sorted(p.name for p in out.iterdir()) == [DATA_DIR]
    assert [p.name for p in (out / DATA_DIR).iterdir()] == [JOURNAL_FILE]
    report = slogate("report", str(out))
    assert report.returncode == 3, report.stderr
    assert "Traceback" not in report.stderr
    doc = summary(out)
    assert doc["run"]["complete"] is False
    assert "killed" in doc["run"]["incomplete_reason"]
    assert 0 < doc["scenarios"]["exact-chat"]["requests"]["ok"] <= answered


@pytest.mark.slow
def test_a_run_against_an_endless_stream_ends_on_time_and_counts_it_cancelled(
    tmp_path: Path,
) -> None:
    """Valid output forever, on the completions and on /metrics alike: the run
    ends at its duration (the last metrics scrape is bounded as a whole, not
    per read) and the cut requests are cancelled, not errors; their timelines
    are kept, flagged cut off, from their send through their first token to
    the cut."""
    done, took, out = run_against(tmp_path, "endless")
    assert done.returncode == 3, done.stderr[-2000:]  # nothing finished: nothing measured
    assert took < 4 + 2 + 10 + 15
    doc = summary(out)
    assert doc["run"]["cancelled_at_stop"] == 2  # both users' requests, cut at the end
    assert doc["scenarios"]["exact-chat"]["requests"]["failed"] == 0
    t = RunData.load(out).timelines
    assert t is not None
    assert list(t.flags["cut_off"]) == [1, 1] and list(t.flags["ok"]) == [0, 0]
    c = t.columns
    # each streamed from its first token on until the stop, about 4 s in
    assert all(
        0 < ttft < e2e < 4000 + 2000 for ttft, e2e in zip(c["ttft_ms"], c["e2e_ms"], strict=True)
    )
    assert len(set(t.user)) == 2


@pytest.mark.slow
def test_a_drain_ends_when_its_time_is_up_and_cuts_off_what_still_runs(tmp_path: Path) -> None:
    """--drain waits for the requests in flight, but no longer than it says: a
    stream that never ends is cut off when the drain runs out, and counted as
    cancelled at the stop, as without a drain."""
    done, took, out = run_against(tmp_path, "endless", "4s", "--drain", "6s")
    assert done.returncode == 3, done.stderr[-2000:]
    assert 4 + 6 <= took < 4 + 6 + 2 + 10 + 15
    doc = summary(out)
    assert doc["run"]["cancelled_at_stop"] == 2
    assert doc["scenarios"]["exact-chat"]["requests"]["failed"] == 0


def _whole_request(conn: socket.socket) -> bytes:
    """Head and body (by its Content-Length) of one request."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?i)content-length:\s*(\d+)", head)
    while length and len(body) < int(length.group(1)):
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


class _StopsAccepting:
    """A listener that answers the run's pre-flight (its model list; 404 to
    other GETs; 400 to a POST that does not stream, as a served route refuses
    the probe), holds the first load request unanswered and then accepts no
    more: later connections wait in its backlog of one (their requests
    written to the kernel, never read) or, past it, in the handshake (nothing
    written). ``received()`` accepts what the backlog held once the run is
    over and returns every load request that reached the server."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.held: list[tuple[socket.socket, bytes]] = []
        self.thread = threading.Thread(target=self._answer_preflight, daemon=True)
        self.thread.start()

    def _answer_preflight(self) -> None:
        models = b'{"object": "list", "data": [{"id": "m", "owned_by": "backlog"}]}'
        while True:
            conn, _ = self.sock.accept()
            request = _whole_request(conn)
            if request.startswith(b"POST ") and re.search(rb'"stream"\s*:\s*true', request):
                self.held.append((conn, request))
                return
            if request.startswith(b"GET /v1/models"):
                status, body = b"200 OK", models
            else:
                status, body = (b"400 Bad Request", b"{}") if request.startswith(b"POST ") else (
                    b"404 Not Found", b"{}")  # fmt: skip
            with conn:
                conn.sendall(
                    b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (status, len(body), body)
                )

    def received(self) -> list[bytes]:
        self.thread.join(timeout=10)
        requests = [request for conn, request in self.held]
        for conn, _ in self.held:
            conn.close()
        self.sock.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                conn, _ = self.sock.accept()
                with conn:
                    conn.settimeout(1)
                    with contextlib.suppress(OSError):
                        requests.append(conn.recv(65536))
        self.sock.close()
        return [r for r in requests if r.startswith(b"POST ")]


@pytest.mark.slow
def test_cancelled_at_stop_counts_only_requests_that_were_sent(tmp_path: Path) -> None:
    """Eight users, started a quarter second apart, against a server that
    stops accepting after its first load request: that request and the two
    its backlog then holds are written and cut off at the stop; the other
    users' handshakes find the backlog full and never complete, so their
    requests were never sent and are not counted (the code before counted
    all 8). The users start apart so that each handshake meets the backlog as
    the one before left it: started together, every handshake completes on
    the client's side before the server has filled its backlog, and the
    client rightly counts what it wrote."""
    scenario = scenario_file(
        tmp_path,
        "exact-chat",
        load={"users": 8, "spawn_rate": 4, "duration": "4s"},
        timeouts={"connect": "60s", "first_token": "60s", "stall": "60s"},
    )
    server = _StopsAccepting()
    out = tmp_path / "out"
    done = slogate(
        "run", str(scenario), "--host", server.url, "--out", str(out), "--metrics-url", "off"
    )
    posts = server.received()
    assert done.returncode == 3, done.stderr[-2000:]  # nothing measured
    assert len(posts) == 3, posts  # the one held, and the backlog's two
    assert summary(out)["run"]["cancelled_at_stop"] == len(posts)
    # the timelines keep those sent, as the server saw them: none got a first token
    t = RunData.load(out).timelines
    assert t is not None and list(t.flags["cut_off"]) == [1] * len(posts)
    assert list(t.columns["ttft_ms"]) == [UNKNOWN] * len(posts)
