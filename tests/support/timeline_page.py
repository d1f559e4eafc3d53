"""The request timeline page (timeline.html) as a person uses it in Chromium:
hover a bar, type into the search box."""

from __future__ import annotations

import json
from typing import Any

from chromium import Browser


def hover_bar(browser: Browser, nth: int, part: str) -> tuple[str, list[Any]]:
    """Hover the ``nth`` bar's ``part`` (``wait``, ``itl``): the tooltip's
    text once shown, and the numbers the page holds for that bar."""
    x, y, index = browser.evaluate(
        f"(() => {{ const g = document.querySelectorAll('g.req')[{nth}];"
        f" const r = g.querySelector('rect.{part}').getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2, +g.dataset.i]; })()"
    )
    browser.mouse("mouseMoved", x, y)
    tip = browser.wait_for(
        "document.getElementById('tip').style.display === 'block'"
        " && document.getElementById('tip').textContent"
    )
    rows = browser.evaluate("JSON.parse(document.getElementById('requests').textContent)")
    return tip, rows[index]


def search(browser: Browser, text: str) -> None:
    """Type ``text`` into the timeline's search box."""
    browser.evaluate(
        "(() => { const q = document.getElementById('query');"
        f" q.value = {json.dumps(text)}; q.dispatchEvent(new Event('input')); }})()"
    )
