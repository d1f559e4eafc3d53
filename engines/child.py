"""One child process for every engine launcher (simulated, exact, llama.cpp, vLLM).

Each launcher needs the same three things, and getting any of them wrong leaks
servers between tests or hides why one failed to start:

- start in its own process group, so stopping it also stops the workers an
  engine forks (vLLM's engine core, tokenizer pools) and a Ctrl-C meant for
  slogate reaches the engine only through slogate's own shutdown;
- wait until ready with a deadline, failing with the log's last lines when the
  child exits or the deadline passes (a start failure is nearly always
  explained there);
- stop: close stdin (a child that exits with its stdin shuts down cleanly),
  then SIGTERM the group, then SIGKILL it after a grace.

The child's stderr (and its stdout, unless a ready line is read from it) goes
to a file, never to an unread pipe, which would fill and stall the child.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

LOG_TAIL_LINES = 20
POLL_S = 0.05


class ChildStartError(RuntimeError):
    """The child exited or was not ready by the deadline (its log's tail attached)."""


class Child:
    """A started child process; see :func:`start_child`."""

    def __init__(
        self,
        name: str,
        process: subprocess.Popen[bytes],
        log: IO[bytes],
        log_path: Path | None,
        ready_prefix: str | None,
    ) -> None:
        self.name = name
        self.process = process
        self.log_path = log_path
        self._log = log
        self._ready_line: str | None = None
        self._reader: threading.Thread | None = None
        if ready_prefix is not None:
            self._reader = threading.Thread(
                target=self._drain_stdout, args=(ready_prefix,), name=f"{name}-stdout", daemon=True
            )
            self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        """Everything the child wrote to its log so far."""
        self._log.flush()
        with open(self._log.fileno(), "rb", closefd=False) as log:
            log.seek(0)
            return log.read().decode("utf-8", "replace")

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_ready(
        self,
        probe: Callable[[], bool],
        timeout_s: float,
        *,
        ready: str = "ready",
        exit_ok: bool = False,
    ) -> None:
        """Poll ``probe`` until it answers True; ChildStartError if the child
        exits first or ``timeout_s`` passes (``ready`` says what it was not).
        ``exit_ok``: a child that exits 0 has handed the serving on (``helm
        upgrade``, ``kubectl apply``), so only the deadline ends the wait."""
        deadline = time.monotonic() + timeout_s
        while not probe():
            code = self.process.poll()
            handed_on = exit_ok and code == 0
            if code is not None and not handed_on and not probe():  # last words may be "ready"
                raise ChildStartError(
                    f"{self.name} exited with code {code} while starting{self._log_note()}"
                )
            if time.monotonic() >= deadline:
                raise ChildStartError(
                    f"{self.name} not {ready} after {timeout_s:g} s{self._log_note()}"
                )
            time.sleep(POLL_S)

    def wait_ready_line(self, timeout_s: float) -> str:
        """The rest of the child's first stdout line that starts with the ready
        prefix given to :func:`start_child`."""
        if self._reader is None:
            raise ValueError(f"{self.name} was started without a ready line to wait for")
        self.wait_ready(lambda: self._ready_line is not None, timeout_s)
        assert self._ready_line is not None
        return self._ready_line

    def wait(self, timeout_s: float | None = None) -> int | None:
        """The exit code once the child exits, or None if it still runs after ``timeout_s``."""
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float) -> int:
        """Close stdin, then SIGTERM the group, then SIGKILL it, each after ``grace_s``;
        the leader's exit code."""
        process = self.process
        if process.stdin is not None and not process.stdin.closed:
            process.stdin.close()
            self.wait(grace_s)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if process.poll() is not None:
                break
            _signal_group(process.pid, sig)
            self.wait(grace_s)
        code = process.wait()
        # Workers the leader forked and left behind share its group: end them too.
        _signal_group(process.pid, signal.SIGKILL)
        if self._reader is not None:
            self._reader.join(grace_s)
        self._log.close()
        return code

    def _drain_stdout(self, prefix: str) -> None:
        """Find the ready line, then keep reading so the pipe never fills."""
        stdout = self.process.stdout
        assert stdout is not None
        with stdout:
            for raw in stdout:
                line = raw.decode("utf-8", "replace").strip()
                if self._ready_line is None and line.startswith(prefix):
                    self._ready_line = line[len(prefix) :]

    def _log_note(self) -> str:
        where = f" (log {self.log_path})" if self.log_path else ""
        tail = self.log_tail()
        return f"{where}:\n{tail}" if tail else f"{where}; its log is empty"


def start_child(
    command: Sequence[str],
    *,
    name: str,
    log_path: Path | None = None,
    ready_prefix: str | None = None,
    stdin_pipe: bool = False,
    env: Mapping[str, str] | None = None,
    cpus: set[int] | None = None,
) -> Child:
    """Start ``command`` in a new process group.

    Its output goes to ``log_path`` (an anonymous temporary file when None).
    With ``ready_prefix``, stdout is read instead for the line starting with it
    (:meth:`Child.wait_ready_line`). ``stdin_pipe`` gives it a stdin that
    :meth:`Child.stop` closes first; ``cpus`` pins it to those cores.
    """
    log: IO[bytes] = (
        log_path.open("w+b") if log_path is not None else tempfile.TemporaryFile()  # noqa: SIM115
    )
    try:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=subprocess.PIPE if ready_prefix is not None else log,
            stderr=log,
            env=dict(env) if env is not None else None,
            preexec_fn=lambda: _own_group(cpus),
        )
    except BaseException:
        log.close()
        raise
    return Child(name, process, log, log_path, ready_prefix)


def group_peak_rss_bytes(pgid: int) -> int | None:
    """The peak resident memory (VmHWM) summed over the processes of group
    ``pgid``, read while they run: an engine's workers count with it. None where
    /proc cannot say (not Linux, the group gone)."""
    total, found = 0, False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # The fields after the command's closing parenthesis: state, ppid, pgrp, ...
            if int(stat.read_text().rpartition(")")[2].split()[2]) != pgid:
                continue
            status = (stat.parent / "status").read_text()
        except (OSError, ValueError, IndexError):
            continue  # ended while being read
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1]) * 1024
                found = True
    return total if found else None


def _own_group(cpus: set[int] | None) -> None:
    """In the child before it runs: a process group of its own, in slogate's session.

    Not a session of its own (setsid): Linux schedules each session as one group
    (autogroup), which changes who runs first when the engine and the client it
    answers wake together. Started with setsid, the exact server logged a
    request after the test had read its log (tests/client/test_client.py's
    misbehaving-server cases found the previous case's request, every run); in
    slogate's session they pass."""
    os.setpgid(0, 0)
    if cpus:
        os.sched_setaffinity(0, cpus)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is already empty
        os.killpg(pid, sig)
