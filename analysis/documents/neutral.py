"""Text from outside (an engine's model name, an error body, a scenario's
strings) made safe to show in any output: the terminal, Markdown, JUnit XML,
metrics labels and HTML all pass their text through :func:`neutral_text`, and
every log line of a load process through :class:`NeutralLog` (a line built
from an exception's text is server text too).

Each control character but tab and newline (C0, DEL, C1: an ESC starts a
terminal escape sequence, a carriage return overwrites a CI log's line) and
each Unicode bidi control (embeddings, overrides, isolates and the marks:
they reorder what is shown around them, so ``exe.txt`` can display as
``txt.exe``) becomes U+FFFD, so a reader sees that something was there. Tab
and newline are each output's own business (Markdown joins lines, the HTML
keeps them). A CSV cell is text a spreadsheet runs: :func:`neutral_cell`
also quotes what would start a formula.
"""

from __future__ import annotations

import logging

__all__ = ["NEUTRALISED", "NeutralLog", "neutral_cell", "neutral_text", "neutralise_logs"]

_KEPT = {0x09, 0x0A}
NEUTRALISED = frozenset(
    chr(c)
    for c in [
        *(c for c in range(0x20) if c not in _KEPT),
        *range(0x7F, 0xA0),  # DEL and C1 (0x9B is a one-byte CSI)
        0x061C,  # Arabic letter mark
        0x200E,  # left-to-right mark
        0x200F,  # right-to-left mark
        *range(0x202A, 0x202F),  # LRE RLE PDF LRO RLO
        *range(0x2066, 0x206A),  # LRI RLI FSI PDI
    ]
)
_TABLE = dict.fromkeys(map(ord, NEUTRALISED), "\ufffd")
_TRACEBACKS = logging.Formatter()


def neutral_text(text: str) -> str:
    """``text`` with every control and bidi character replaced by U+FFFD; a
    ``str`` subclass keeps its class (Jinja's Markup stays Markup)."""
    return text.translate(_TABLE)


# What a spreadsheet reads as a formula at a cell's start (OWASP "CSV
# Injection"): ``=HYPERLINK(...)`` from a server would be a live link.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutral_cell(text: str) -> str:
    """``text`` as a CSV cell: neutralised, and quoted with a leading ``'``
    where a spreadsheet would take it for a formula."""
    text = neutral_text(text)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


class NeutralLog(logging.Filter):
    """A handler's filter: each record's message, its arguments merged in, and
    its traceback (whose last line is the exception's text) neutralised."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = neutral_text(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = neutral_text(_TRACEBACKS.formatException(record.exc_info))
        return True


def neutralise_logs(logger: logging.Logger | None = None) -> None:
    """Every handler of ``logger`` (the root's: where Locust's go) filters with
    :class:`NeutralLog`, once."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, NeutralLog) for f in handler.filters):
            handler.addFilter(NeutralLog())
