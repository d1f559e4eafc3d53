"""Helpers for tests that run real loads: scenario files, slogate/locust processes."""

from __future__ import annotations

import contextlib
import http.server
import io
import itertools
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RUN_LOCUSTFILE = ROOT / "locustfiles" / "run.py"


def scenario_file(tmp_path: Path, base: str, **changes: Any) -> Path:
    """A copy of tests/data/<base>.yaml with top-level sections updated; a key
    given as None inside a section is removed from it."""
    data = yaml.safe_load((ROOT / "tests" / "data" / f"{base}.yaml").read_text())
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            merged = {**data[key], **value}
            data[key] = {k: v for k, v in merged.items() if v is not None}
        else:
            data[key] = value
    path = tmp_path / f"{base}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def slogate(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "slogate.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def cli(*args: str) -> subprocess.CompletedProcess:
    """``slogate ARGS`` in this process (no interpreter to start: a fraction of
    a second instead of one or two), its exit code and output as ``slogate`` gives
    them. For commands that send no load; a run stays a subprocess."""
    from slogate.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stopped:  # argparse's usage errors
            code = stopped.code if isinstance(stopped.code, int) else 2
    return subprocess.CompletedProcess(["slogate", *args], code, out.getvalue(), err.getvalue())


def locust_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(RUN_LOCUSTFILE), *args]


def summary(out: Path) -> dict[str, Any]:
    return json.loads((out / "summary.json").read_text())


def held_by_the_machine(s: dict[str, Any]) -> str | None:
    """A sentence when a run's generator loop was held more by the machine than
    by its own work (waiting for a core other processes had, stopped, or the
    hypervisor's steal), as the run (its summary ``s``) measured it; None
    otherwise. A claim on the generator's timing cannot be checked on such a
    run, and the product rightly says so: clean-clone CI runs here had the
    hypervisor take 13 to 19% of the machine, the loop stalled 50 ms at p99
    and the run was INVALID, its diagnosis naming the generator first."""
    held = s["generator"]["loop_held_ms"]
    if held["running"] is None:
        return None
    machine = held["total"] - held["running"]
    if machine <= held["running"]:
        return None
    steal = held["machine_steal_share"] or 0.0
    return (
        f"the machine held the generator's loop {machine:.0f} of {held['total']:.0f} ms "
        f"(the hypervisor took {steal:.1%} of its CPU time)"
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def unreachable_host() -> Iterator[str]:
    """A loopback address that refuses connections for as long as it is held: the
    port is bound but never listened on, so no other test's server can take it
    (a port that was merely free when chosen was taken once by a parallel test's
    engine, and the "unreachable" host answered)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


class ModelsHandler(http.server.BaseHTTPRequestHandler):
    """A quiet handler of a fake engine: ``GET /v1/models`` lists one model,
    ``m``, owned by ``OWNED_BY``; any other GET is 404. Subclass it to add more."""

    OWNED_BY = "test"

    def log_message(self, *args: object) -> None:
        pass

    def load_request(self) -> dict | None:
        """This POST's JSON body, or None when it was the pre-flight's probe of
        the route (a body that does not stream), refused here as incomplete (400)
        as a server that serves the route refuses it."""
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("stream"):
            return body
        self.send_response(400)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return None

    def do_GET(self) -> None:
        if self.path != "/v1/models":
            self.send_error(404)
            return
        self.answer(200, {"object": "list", "data": [{"id": "m", "owned_by": self.OWNED_BY}]})

    def answer(self, status: int, payload: Any) -> None:
        """A whole JSON answer."""
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_stream(self) -> None:
        """A 200 with SSE headers, chunked (the handler's protocol is HTTP/1.1)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def event(self, data: bytes) -> None:
        """One ``data:`` event, as a chunk of its own, flushed."""
        event = b"data: " + data + b"\n\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
        self.wfile.flush()

    def stream(self, *payloads: object) -> None:
        """A whole stream: each payload as JSON, ``[DONE]`` and the last chunk."""
        self.start_stream()
        for payload in payloads:
            self.event(json.dumps(payload).encode())
        self.event(b"[DONE]")
        self.wfile.write(b"0\r\n\r\n")

    def reply(self, text: tuple[str, str], prompt_tokens: int = 1) -> None:
        """A streamed chat reply of two chunks of ``text`` and its usage."""
        self.stream(
            {"choices": [{"delta": {"role": "assistant", "content": text[0]}}]},
            {"choices": [{"delta": {"content": text[1]}, "finish_reason": "stop"}]},
            {"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 2}},
        )


def served(engine, seen: list = ()) -> dict[str, int]:
    """Outcomes in the engine's log: ``seen`` (entries read earlier) and the rest."""
    outcomes: dict[str, int] = {}
    for entry in [*seen, *engine.truth()]:
        outcomes[entry.outcome] = outcomes.get(entry.outcome, 0) + 1
    return outcomes


def assert_every_request_accounted(out, engine, users: int, at_least: int, seen=()) -> None:
    """Conservation at shutdown: each request the server saw is counted once,
    as finished (ok or failed) or as cancelled at stop, and nothing is invented.

    A stream the server completed can rightly count as cancelled: its last
    bytes were still in the client's socket buffer when the stop ended the
    user. So not ``finished == done`` but: finished <= done, and those cut
    off on the client (done - finished, plus the streams the server was still
    writing) fit in ``cancelled``, which is at most one request per user.
    """
    s = summary(out)
    r = s["scenarios"]["exact-chat"]["requests"]
    finished, cancelled = r["ok"] + r["failed"], s["run"]["cancelled_at_stop"]
    outcomes = served(engine, seen)
    done, closed = outcomes.get("done", 0), outcomes.get("client_closed", 0)
    assert finished > at_least
    assert finished <= done
    assert (done - finished) + closed <= cancelled <= users, (finished, cancelled, outcomes)


def wait_until_served(engine, count: int, timeout_s: float = 60) -> list:
    """The engine's log entries once it has finished ``count`` requests (the
    log is drained as it is read: pass them on to the accounting)."""
    seen: list = []
    deadline = time.monotonic() + timeout_s
    while len(seen) < count:
        assert time.monotonic() < deadline, f"the engine finished {len(seen)} of {count}"
        seen += engine.truth()
        time.sleep(0.05)
    return seen


def stop_workers(workers: list[subprocess.Popen]) -> None:
    """Workers end when their master does; one that does not within 30 s is killed."""
    for w in workers:
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()


def requests_by_sender(out: Path) -> dict[str, dict[tuple[int, int], int]]:
    """The run's requests per sender, as ``data/timelines.json`` recorded them:
    {kind: {(process, number): requests}}; a user's or a slot's requests one
    after another (an agent session's subagents run side by side)."""
    from slogate.analysis.documents.rundata import RunData
    from slogate.analysis.measurement.records import sender_parts

    t = RunData.load(out).timelines
    assert t is not None
    spans: dict[int, list[tuple[float, float]]] = {}
    for row, user in enumerate(t.user):
        start = t.columns["start_s"][row]
        spans.setdefault(user, []).append((start, start + t.columns["e2e_ms"][row] / 1000))
    found: dict[str, dict[tuple[int, int], int]] = {}
    for user, own in spans.items():
        kind, process, number = sender_parts(user)
        own.sort()
        overlaps = [(a, b) for a, b in itertools.pairwise(own) if b[0] < a[1] - 1e-3]
        assert kind == "session" or not overlaps, f"{kind} {process}/{number}: {overlaps[:3]}"
        found.setdefault(kind, {})[(process, number)] = len(own)
    return found
