"""The report and the index open in headless Chromium offline, with no console
error; the report's tables measured as rendered at 1280 and 1920 px."""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest
from chromium import CHROMIUM, Browser
from chromium import FLAGS as BROWSER_FLAGS
from reportdata import realistic_run

from slogate.reports import write_index, write_results

pytestmark = pytest.mark.browser

FLAGS = (*BROWSER_FLAGS, "--enable-logging=stderr", "--v=0", "--window-size=1280,2400")


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


LONG_NAME = "retrieval-augmented-chat-for-the-support-team-eu-west-1-canary"
# many SLOs, of every kind: passing, failing, inconclusive (p99.9 of few samples)
MANY_SLOS = [
    {"metric": metric, "stat": stat, "limit": limit, "kind": "max"}
    for metric, stat, limit in (
        ("ttft_ms", "p50", 500.0),
        ("ttft_ms", "p90", 800.0),
        ("ttft_ms", "p95", 900.0),
        ("ttft_ms", "p99", 2000.0),
        ("ttft_ms", "p999", 2500.0),
        ("ttft_ms", "max", 3000.0),
        ("ttft_sched_ms", "p99", 2000.0),
        ("itl_ms", "p95", 60.0),
        ("itl_ms", "p99", 30.0),
        ("tpot_ms", "p99", 40.0),
        ("e2e_ms", "p99", 4000.0),
        ("e2e_sched_ms", "p99", 8000.0),
        ("max_stall_ms", "p99", 200.0),
        ("chunk_gap_ms", "p99", 100.0),
        ("error_rate", "max", 0.01),
    )
] + [
    {"metric": "goodput", "stat": "rate", "limit": 0.95, "kind": "min"},
    {"metric": "requests_per_s", "stat": "rate", "limit": 5.0, "kind": "min"},
    {"metric": "output_tokens_per_s", "stat": "rate", "limit": 2000.0, "kind": "min"},
]
# each table cell's content measured: taller than one line of its text is a wrap
CELLS = """(() => {
  const tall = [];
  const cells = document.querySelectorAll("main table th, main table td");
  for (const cell of cells) {
    const line = parseFloat(getComputedStyle(cell).lineHeight);
    const range = document.createRange();
    range.selectNodeContents(cell);
    const height = range.getBoundingClientRect().height;
    if (height > 1.5 * line) tall.push([cell.textContent.trim().slice(0, 80), height, line]);
  }
  const wide = [...document.querySelectorAll("main table")].filter(
    t => t.getBoundingClientRect().width > t.parentElement.clientWidth + 1).length;
  const names = [...document.querySelectorAll("main table .ab")].filter(
    s => s.title === s.textContent && s.scrollWidth > s.clientWidth).map(s => s.title);
  const banner = document.querySelector(".banner .line");
  const word = parseFloat(getComputedStyle(banner.querySelector(".word")).lineHeight);
  return {cells: cells.length, tall, wide, names,
          banner: banner.getBoundingClientRect().height / word};
})()"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH")
def test_no_table_cell_of_the_report_wraps_at_1280_or_1920_px(tmp_path: Path) -> None:
    run = realistic_run(n=2000, scenario=LONG_NAME, slos=MANY_SLOS)
    run.meta["generator"] = {"lag_p99_ms": 120.0, "max_lag_ms": 50.0, "cpu_warning": False}
    outcome = write_results(tmp_path / "run", run)
    summary = outcome.summary
    assert summary["verdict"] == "invalid" and len(summary["invalid_reasons"]) == 1
    assert sum(summary["slo_counts"].values()) == len(MANY_SLOS)
    with Browser(tmp_path / "profile") as browser:
        for width in (1280, 1920):
            browser.resize(width, 1000)
            browser.open((tmp_path / "run" / "report.html").as_uri())
            found = browser.evaluate(CELLS)
            assert found["cells"] > 300
            assert found["tall"] == [], width
            assert found["wide"] == 0, width  # every table fits the page
            # abbreviated, whole on hover
            assert found["names"].count(LONG_NAME) >= len(MANY_SLOS)
            assert found["banner"] < 1.5, width  # the verdict, the worst SLO, the counts
            banner = browser.evaluate("document.querySelector('.banner').textContent")
            assert banner.count(summary["invalid_reasons"][0]) == 1
            assert "14 pass · 3 fail · 1 inconclusive" in banner
            browser.screenshot(tmp_path / f"report-{width}.png")
        # printed on A4 landscape (273 mm between the 12 mm margins, 1,032 CSS px)
        browser.resize(1032, 1000)
        browser.send("Emulation.setEmulatedMedia", media="print")
        assert browser.evaluate("getComputedStyle(document.querySelector('nav')).display") == "none"
        assert browser.evaluate(CELLS)["wide"] == 0
        assert browser.evaluate("document.documentElement.scrollWidth") <= 1032
        assert browser.errors == []
