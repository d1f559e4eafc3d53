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
