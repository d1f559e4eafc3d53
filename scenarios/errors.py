"""The one error a scenario file can raise, and the problems it carries.

Every problem names the file, the key path inside it (``workload.input_tokens.p90``)
and what was expected, so a user can fix a file without reading our code. All the
problems found in one pass are reported together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

QUOTED_CHARS = 500  # a value quoted in an error, as an error message is cut elsewhere


def quoted(value: Any) -> str:
    """``repr(value)`` cut to :data:`QUOTED_CHARS`: a 5 MB string where a
    list was expected must not become a 5 MB error line."""
    shown = repr(value)
    if len(shown) <= QUOTED_CHARS:
        return shown
    return f"{shown[:QUOTED_CHARS]}... ({len(shown):,} characters)"


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    path: str  # dotted key path; "" for the file as a whole
    message: str

    def __str__(self) -> str:
        where = f"{self.file}: {self.path}" if self.path else self.file
        return f"{where}: {self.message}"


class ScenarioError(ValueError):
    """A scenario or mix file, or an override applied to it, is not valid."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))
