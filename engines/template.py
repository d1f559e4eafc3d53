"""Any engine or deployment a tune drives through command templates.

A start command with ``{factor}`` placeholders and ``{port}`` (a free local
port picked per treatment), a ready URL polled until it answers 200, and an
optional stop command: enough for ``vllm serve`` on a GPU host, ``helm
upgrade --set``, ``kubectl apply`` or a script of the team's own. A start
command that exits 0 has handed the serving on (a deployment), so only the
ready URL and its deadline decide; one that exits otherwise failed.

Every placeholder must be a factor or ``{port}`` and every factor must appear
in a template, checked before anything starts: a misspelt name would otherwise
run every treatment with the same settings.
"""

from __future__ import annotations

import shlex
import string
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from slogate.engines.child import Child, ChildStartError, group_peak_rss_bytes, start_child
from slogate.engines.served import free_port
from slogate.engines.tunable import EngineStartFailed, RunningTreatment, post

PROBE_TIMEOUT_S = 2.0
STOP_GRACE_S = 10.0
STOP_COMMAND_TIMEOUT_S = 600.0


def placeholders(template: str) -> set[str]:
    """The ``{name}`` fields of ``template`` (``{{`` is a literal brace)."""
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise ValueError(f"template {template!r}: {error}") from None


def answers_200(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_S) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


@dataclass
class RunningTemplate:
    """A treatment started by the start command; ``child`` is that command's process."""

    child: Child
    url: str
    startup_s: float
    ready_url: str
    reset_url: str | None
    stop_command: str | None
    log_dir: Path
    exit_code: int | None = field(default=None, init=False)

    def reset_caches(self) -> None:
        if self.reset_url is not None:
            post(self.reset_url)

    def peak_memory_bytes(self) -> int | None:
        return group_peak_rss_bytes(self.child.pid)

    def alive(self) -> bool:
        code = self.child.process.poll()
        return code is None or (code == 0 and answers_200(self.ready_url))

    def log_tail(self) -> str:
        return self.child.log_tail()

    def stop(self) -> int | None:
        if self.stop_command is not None:
            with (self.log_dir / "stop.log").open("wb") as log:
                subprocess.run(
                    self.stop_command,
                    shell=True,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=STOP_COMMAND_TIMEOUT_S,
                    check=False,
                )
        return self.child.stop(grace_s=STOP_GRACE_S)


@dataclass
class TemplateUnderTune:
    """An engine started per treatment by ``start_command``; ``base_url`` (the
    engine's API, default the ready URL's scheme and host) and ``reset_url``
    (POSTed to empty its caches; none: only the restart empties them) may hold
    placeholders too."""

    start_command: str
    ready_url: str
    factors: tuple[str, ...]
    stop_command: str | None = None
    base_url: str | None = None
    reset_url: str | None = None
    ready_timeout_s: float = 600.0
    kind: str = "template"

    def templates(self) -> dict[str, str]:
        named = {
            "--start-command": self.start_command,
            "--ready-url": self.ready_url,
            "--stop-command": self.stop_command,
            "--engine-url": self.base_url,
            "--reset-url": self.reset_url,
        }
        return {flag: text for flag, text in named.items() if text is not None}

    def __post_init__(self) -> None:
        known = {*self.factors, "port"}
        used: set[str] = set()
        for flag, text in self.templates().items():
            fields = placeholders(text)
            unknown = sorted(fields - known)
            if unknown:
                raise ValueError(
                    f"{flag}: unknown placeholder {{{unknown[0]}}}; known: "
                    + ", ".join(f"{{{name}}}" for name in sorted(known))
                )
            used |= fields
        unused = [name for name in self.factors if name not in used]
        if unused:
            raise ValueError(
                f"factor {unused[0]!r} appears in no template: it would change nothing"
            )

    def check(self, settings: Mapping[str, str]) -> None:
        missing = [name for name in self.factors if name not in settings]
        extra = sorted(set(settings) - set(self.factors))
        if missing or extra:
            name = (missing or extra)[0]
            raise ValueError(f"template engine: setting {name!r} is not one of the factors")

    def filled(self, text: str, settings: Mapping[str, str], port: int | str) -> str:
        """``text`` with the treatment's settings and port in place."""
        return text.format(**settings, port=port)

    def command(self, text: str, settings: Mapping[str, str], port: int | str) -> str:
        """A shell command filled in, each setting quoted for the shell."""
        return self.filled(text, {k: shlex.quote(v) for k, v in settings.items()}, port)

    def start(self, settings: Mapping[str, str], log_dir: Path) -> RunningTreatment:
        port = free_port("127.0.0.1")
        command = self.command(self.start_command, settings, port)
        ready = self.filled(self.ready_url, settings, port)
        log_dir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        child = start_child(
            ["/bin/sh", "-c", command], name="start command", log_path=log_dir / "engine.log"
        )
        try:
            child.wait_ready(
                lambda: answers_200(ready),
                self.ready_timeout_s,
                ready=f"serving at {ready}",
                exit_ok=True,
            )
        except ChildStartError as error:
            tail = child.log_tail()  # before the stop closes the log
            child.stop(grace_s=STOP_GRACE_S)
            raise EngineStartFailed(f"{command}: {error}", tail) from None
        except BaseException:  # interrupted while waiting: leave no engine behind
            child.stop(grace_s=STOP_GRACE_S)
            raise
        parts = urlsplit(ready)
        base = self.base_url or f"{parts.scheme}://{parts.netloc}"
        return RunningTemplate(
            child=child,
            url=self.filled(base, settings, port).rstrip("/"),
            startup_s=time.monotonic() - began,
            ready_url=ready,
            reset_url=None
            if self.reset_url is None
            else self.filled(self.reset_url, settings, port),
            stop_command=(
                None
                if self.stop_command is None
                else self.command(self.stop_command, settings, port)
            ),
            log_dir=log_dir,
        )

    def launch_command(self, settings: Mapping[str, str]) -> str:
        return self.command(self.start_command, settings, "{port}")

    def defaults(self) -> Mapping[str, str]:
        return {}
