"""A run's live progress: a panel redrawn in place on a terminal (checked in a
pseudo-terminal), one line per interval of at most 120 columns elsewhere."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loadruns import ROOT, slogate
from panels import progress

from slogate.engines.exact import ExactEngine
from slogate.reports.progress import LINE_WIDTH, SloNow, progress_line, worst

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_the_line_names_the_load_and_the_worst_slo() -> None:
    line = progress_line(progress())
    assert line == (
        "[slogate]   20/25s users 8 inflight 2 | 1.64 req/s 338 tok/s err 1"
        " | SLO 1 fail 1 inc 1 pass: itl_ms p99 61 ms <= 50 ms"
    )


def test_the_worst_slo_is_the_failing_then_the_undecided_then_the_closest() -> None:
    slos = progress().slos
    assert worst(progress()) == slos[1]
    assert worst(progress(slos=(slos[0], slos[2]))) == slos[2]
    near = SloNow("chat", "e2e_ms p99", 1900.0, 2000.0, True, "pass", "ms")
    assert worst(progress(slos=(slos[0], near))) == near  # 5% headroom before 94%


def test_the_line_fits_120_columns_whatever_the_names() -> None:
    long = "a-scenario-with-a-very-long-name-from-a-generated-mix-" * 3
    slos = tuple(
        SloNow(long, f"answer_tpot_ms p{p}", 1234.5, 1000.0, True, "fail", "ms") for p in (50, 99)
    )
    stalled = progress(
        slos=slos, stall_p99_ms=12.5, blurred_pct=1.9, requests=123_456_789, errors=98_765
    )
    line = progress_line(stalled)
    assert len(line) <= LINE_WIDTH
    assert "generator stalls p99 12.5 ms" in line and "ITL blurred 1.9%" in line
    assert line.startswith("[slogate]   20/25s users 8")


def read_all(fd: int, child: subprocess.Popen, timeout_s: float) -> str:
    """What the child writes to its terminal until it exits."""
    chunks = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed its side
                break
            if not data:
                break
            chunks.append(data)
        elif child.poll() is not None:
            break
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_a_run_on_a_terminal_redraws_one_panel_and_ends_with_the_verdict(tmp_path: Path) -> None:
    with ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as engine:
        main, terminal = pty.openpty()
        os.set_blocking(main, True)
        env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"}
        run = ["run", "tests/data/exact-chat.yaml", "--host", engine.url, "--duration", "5s"]
        child = subprocess.Popen(
            [sys.executable, "-m", "slogate.cli", *run, "--out", str(tmp_path / "o")],
            stdin=terminal, stdout=terminal, stderr=terminal, cwd=ROOT, env=env,
        )  # fmt: skip
        os.close(terminal)
        try:
            screen = read_all(main, child, timeout_s=120)
        finally:
            child.wait(timeout=30)
            os.close(main)
    assert child.returncode == 0, screen[-3000:]
    text = ANSI.sub("", screen)
    assert "[slogate]" not in text  # no log lines on a terminal: the panel
    assert text.count("╭─ slogate") >= 2  # drawn, then redrawn in place
    assert "\x1b[" in screen and "\x1b[2K" in screen  # rich moves the cursor up and erases
    panel = text[text.rindex("╭─ slogate") :]
    for shown in ("users 4", "req/s", "tok/s", "errors 0 of", "ttft_ms p50", "ok so far"):
        assert shown in panel, shown
    assert "generator:" in panel and re.search(r"━ +[56] / 5 s", panel)  # the planned 5 s
    assert re.search(r"verdict PASS, exit 0: .*report\.html\s*$", text)


@pytest.mark.slow
def test_a_run_off_a_terminal_prints_short_lines(tmp_path: Path) -> None:
    with ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as engine:
        done = slogate("run", "tests/data/exact-chat.yaml", "--host", engine.url, "--duration",
                       "4s", "--status-interval", "1", "--out", str(tmp_path / "o"))  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "[slogate]" in line]
    assert len(lines) >= 3
    assert all(len(line[line.index("[slogate]") :]) <= LINE_WIDTH for line in lines)
    assert "╭" not in done.stdout + done.stderr
    assert "verdict PASS, exit 0" in done.stdout
