"""The child-process helper every engine launcher uses, on real child processes."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from slogate.engines.child import ChildStartError, start_child


def python(code: str) -> list[str]:
    return [sys.executable, "-u", "-c", code]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_ready_line_is_found_among_others_and_stdin_closing_stops_it_cleanly() -> None:
    child = start_child(
        python("import sys; print('warming'); print('READY at http://x:1'); sys.stdin.read()"),
        name="reader",
        ready_prefix="READY at ",
        stdin_pipe=True,
    )
    assert child.wait_ready_line(10) == "http://x:1"
    assert child.stop(grace_s=5) == 0


def test_a_child_that_exits_while_starting_fails_with_its_code_and_log_tail() -> None:
    child = start_child(
        python("import sys; print('unknown model: nope', file=sys.stderr); sys.exit(7)"),
        name="broken engine",
        ready_prefix="READY ",
    )
    with pytest.raises(ChildStartError, match=r"broken engine exited with code 7 while starting"):
        child.wait_ready_line(10)
    with pytest.raises(ChildStartError, match="unknown model: nope"):
        child.wait_ready_line(10)
    assert child.stop(grace_s=1) == 7


def test_the_deadline_names_what_was_awaited_and_the_log_file(tmp_path) -> None:
    log = tmp_path / "engine.log"
    child = start_child(
        python("import time; print('loading weights'); time.sleep(30)"), name="slow", log_path=log
    )
    started = time.monotonic()
    with pytest.raises(ChildStartError) as caught:
        child.wait_ready(lambda: False, 0.3, ready="healthy at /health")
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert message.startswith("slow not healthy at /health after 0.3 s")
    assert f"(log {log})" in message and "loading weights" in message
    assert child.stop(grace_s=5) == -signal.SIGTERM
    assert "loading weights" in log.read_text()


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    child = start_child(
        python(
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('READY'); time.sleep(60)"
        ),
        name="stubborn",
        ready_prefix="READY",
    )
    child.wait_ready_line(10)
    started = time.monotonic()
    assert child.stop(grace_s=0.5) == -signal.SIGKILL
    assert 0.5 <= time.monotonic() - started < 5


def test_stop_ends_the_workers_the_child_forked_and_keeps_signals_meant_for_the_parent_away() -> (
    None
):
    child = start_child(
        python(
            "import subprocess, sys, time; "
            "w = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print('READY', w.pid); time.sleep(60)"
        ),
        name="forking",
        ready_prefix="READY ",
    )
    worker = int(child.wait_ready_line(10))
    assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
    assert os.getsid(child.pid) == os.getsid(0)  # one scheduling group with slogate
    assert os.getpgid(worker) == child.pid
    child.stop(grace_s=5)
    deadline = time.monotonic() + 5
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(worker)
