"""The documentation's pictures, made from a real run: the progress panel a
terminal shows, the report and the request timeline.

Runs ``slogate run`` in a pseudo-terminal against the embedded simulated engine
(so the panel is the one a person sees), then opens the results in headless
Chromium (tests/support/chromium.py) and writes small PNGs to ``docs/img/``:

    .venv/bin/python tools/screenshots.py [--duration 40s] [--out docs/img]
"""

from __future__ import annotations

import argparse
import os
import pty
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from chromium import Browser  # noqa: E402
from test_progress import read_all  # noqa: E402

SLOGATE = Path(sys.executable).parent / "slogate"
# rich redraws its live panel after erasing the lines of the last one
ERASE_LINE = "\x1b[2K"


def run_in_terminal(argv: list[str], timeout_s: float) -> str:
    """Everything ``argv`` wrote to a 100-column pseudo-terminal."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "100", "LINES": "40", "TERM": "xterm-256color"}
    child = subprocess.Popen(argv, stdin=follower, stdout=follower, stderr=follower, cwd=ROOT,
                             env=env, close_fds=True)  # fmt: skip
    os.close(follower)
    try:
        return read_all(leader, child, timeout_s)
    finally:
        child.wait(timeout=30)
        os.close(leader)


def last_panel(output: str) -> str:
    """The panel as the run's last redraw left it, with its colours."""
    frame = output[output.rindex(ERASE_LINE) + len(ERASE_LINE) :]
    lines = frame.splitlines()
    bottom = next(i for i, line in enumerate(lines) if "╰" in line)
    return "\n".join(lines[: bottom + 1])


def panel_svg(ansi: str) -> str:
    """The panel drawn as rich draws a terminal, as wide as the panel."""
    from rich.console import Console
    from rich.text import Text

    text = Text.from_ansi(ansi)
    width = max(line.cell_len for line in text.split())
    with open(os.devnull, "w") as sink:
        console = Console(record=True, width=width, file=sink)
        console.print(text)
    return console.export_svg(title="slogate run")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", default="40s")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "run"
        output = run_in_terminal(
            [str(SLOGATE), "run", "chat", "--users", "64", "--duration", args.duration,
             "--warmup", "2s", "--out", str(results)],
            timeout_s=600,
        )  # fmt: skip
        if not (results / "report.html").exists():
            print(output[-3000:], file=sys.stderr)
            return 1
        panel = Path(scratch) / "panel.svg"
        panel.write_text(panel_svg(last_panel(output)), encoding="utf-8")
        with Browser(Path(scratch) / "profile", width=900, height=520) as browser:
            browser.open(panel.as_uri())
            browser.resize(*browser.evaluate(
                "(() => { const b = document.querySelector('svg').viewBox.baseVal;"
                " return [Math.ceil(b.width) + 16, Math.ceil(b.height) + 16]; })()"
            ))  # fmt: skip
            box = browser.evaluate(
                "(() => { const r = document.querySelector('svg').getBoundingClientRect();"
                " return {x: r.x, y: r.y, width: r.width, height: r.height, scale: 1}; })()"
            )
            browser.screenshot(args.out / "progress-panel.png", clip=box)
            browser.resize(1280, 900)
            browser.open((results / "report.html").as_uri())
            browser.screenshot(args.out / "report.png")
            browser.open((results / "timeline.html").as_uri())
            bar = browser.evaluate(
                "(() => { const r = document.querySelectorAll('g.req')[12]"
                ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
            )
            browser.mouse("mouseMoved", *bar)
            browser.screenshot(args.out / "timeline.png")
    for name in ("progress-panel.png", "report.png", "timeline.png"):
        print(f"{args.out / name}: {shrink(args.out / name) // 1024} KB")
    return 0


def shrink(png: Path) -> int:
    """The PNG in 128 colours (screenshots of flat pages lose nothing visible); its size."""
    from PIL import Image

    with Image.open(png) as image:
        small = image.convert("RGB").quantize(colors=128, method=Image.Quantize.FASTOCTREE)
    small.save(png, optimize=True)
    return png.stat().st_size


if __name__ == "__main__":
    sys.exit(main())
