"""What the real engines slogate starts (llama.cpp, vLLM) have in common: the
cache they are installed in, and one server process run as a child that is
started, waited for until it serves, and stopped with whatever it forked.

Each engine says only what differs: its command line, its environment and
cores, and how to tell that it serves.
"""

from __future__ import annotations

import abc
import os
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import ClassVar

from slogate.engines.child import (
    LOG_TAIL_LINES,
    Child,
    ChildStartError,
    group_peak_rss_bytes,
    start_child,
)

CACHE_ENV = "SLOGATE_CACHE"


def cache_dir() -> Path:
    """Where the install scripts put the engines (``$SLOGATE_CACHE``, default
    ``~/.cache/slogate``): outside the checkout, shared by every clone."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "slogate"


def free_port(host: str) -> int:
    """A port the OS considers free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ServedEngine(abc.ABC):
    """One engine server process: ``start()`` returns its URL once it serves,
    ``stop()`` ends it and its process group. Usable as a context manager.
    Its output goes to ``log_path`` (a temporary file unless given), quoted in
    the error when it fails to start."""

    label: ClassVar[str]
    start_error: ClassVar[type[RuntimeError]]
    stop_grace_s: ClassVar[float] = 10.0

    def __init__(
        self, host: str, port: int, startup_timeout_s: float, log_path: Path | None
    ) -> None:
        self.host = host
        self.port = port
        self.startup_timeout_s = startup_timeout_s
        self.log_path = log_path
        self._wanted_port = port
        self._child: Child | None = None
        self._peak_rss = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The server's pid, which is also its process group's id."""
        return self._child.pid if self._child else None

    @abc.abstractmethod
    def command(self, port: int) -> list[str]:
        """The engine's command line, serving on ``port``."""

    @abc.abstractmethod
    def serves(self) -> bool:
        """True once the server answers requests."""

    def environment(self) -> Mapping[str, str] | None:
        return None

    def cpus(self) -> set[int] | None:
        return None

    def start(self) -> str:
        """Start the server and return its URL once :meth:`serves` says so."""
        if self._child is not None:
            raise self.start_error(f"{self.label} already running at {self.url}")
        self.port = self._wanted_port or free_port(self.host)
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix=f"{self.label}-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self._child = start_child(
            self.command(self.port),
            name=self.label,
            log_path=self.log_path,
            env=self.environment(),
            cpus=self.cpus(),
        )
        try:
            self._child.wait_ready(
                self.serves, self.startup_timeout_s, ready=f"serving at {self.url}"
            )
        except ChildStartError as error:
            self.stop()
            raise self.start_error(str(error)) from None
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self, grace_s: float | None = None) -> int | None:
        """SIGTERM to the process group, SIGKILL after ``grace_s`` (default
        the engine's own); the server's exit code, None if never started."""
        child, self._child = self._child, None
        if child is None:
            return None
        return child.stop(self.stop_grace_s if grace_s is None else grace_s)

    def wait(self, timeout_s: float | None = None) -> int | None:
        """Wait for the server to exit; its exit code, or None on timeout."""
        return self._child.wait(timeout_s) if self._child is not None else None

    def log_tail(self) -> str:
        """The last lines of the server's log, running or not (read from its
        file once stopped, so a crash's last words outlive the process)."""
        if self._child is not None:
            return self._child.log_tail()
        return log_file_tail(self.log_path)

    def running(self) -> bool:
        """True while the server process started by :meth:`start` has not exited."""
        return self._child is not None and self._child.process.poll() is None

    def peak_rss_bytes(self) -> int | None:
        """The peak resident memory of the server's process group: each live
        process's high-water mark (VmHWM) summed, and the largest such sum seen
        by any call (a worker that exited took its own mark with it). None
        before start or where /proc has no such field."""
        if self._child is not None:
            self._peak_rss = max(self._peak_rss, group_peak_rss_bytes(self._child.pid) or 0)
        return self._peak_rss or None

    def __enter__(self) -> ServedEngine:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def log_file_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file; '' when there is none."""
    if path is None or not path.is_file():
        return ""
    return "\n".join(path.read_text("utf-8", "replace").splitlines()[-lines:])
