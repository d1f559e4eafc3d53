"""The report and the index open in headless Chromium offline, with no console error."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from reportdata import realistic_run

from slogate.reports import write_index, write_results

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--window-size=1280,2400",
)


def screenshot(page: Path, png: Path, profile: Path) -> str:
    """Take a screenshot of ``page``; returns Chromium's log (console messages included)."""
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH: install the Debian package (apt-get install -y chromium)",
)
@pytest.mark.parametrize("page", ["run/report.html", "index.html"])
def test_pages_render_in_headless_chromium(tmp_path: Path, page: str) -> None:
    write_results(tmp_path / "run", realistic_run(n=1000))
    write_index(tmp_path)
    png = tmp_path / "shot.png"
    log = screenshot(tmp_path / page, png, tmp_path / "profile")
    console = [line for line in log.splitlines() if "CONSOLE" in line]
    assert console == []
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1280, 2400)
    assert len(data) > 20_000


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH")
def test_history_dashboard_renders_with_its_filters_in_headless_chromium(tmp_path: Path) -> None:
    for i, scale in enumerate((1.0, 1.02, 0.99, 1.3, 1.01)):
        run = realistic_run(n=2000, seed=i, scale=scale)
        run.meta["run_id"] = f"night-{i}"
        run.meta["started_at"] = f"2026-01-0{i + 1}T02:00:00+00:00"
        write_results(tmp_path / f"night-{i}", run)
    page = write_index(tmp_path)
    assert page is not None and 'class="mk regression"' in page.read_text()
    png = tmp_path / "shot.png"
    log = screenshot(page, png, tmp_path / "profile")
    assert [line for line in log.splitlines() if "CONSOLE" in line] == []
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert dom.returncode == 0 and 'data-filter="revision"' in dom.stdout
