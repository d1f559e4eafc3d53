"""Durations with units, as scenario files and command-line flags write them.

``500ms``, ``30s``, ``5m``, ``1h``, ``1m30s`` or a bare number of seconds: a
person reading a scenario should not have to guess the unit of ``300``.
"""

from __future__ import annotations

import math
import re

from slogate.scenarios.errors import quoted

_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
# What parse_duration reads from text, for the scenario's JSON Schema: parts
# with units, or a plain decimal number of seconds (surrounding spaces allowed).
_SECONDS = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
DURATION_PATTERN = rf"^\s*(?:(?:{_PART.pattern})+|{_SECONDS})\s*$"


def parse_duration(value: object) -> float:
    """Seconds in ``value`` (a number of seconds or a text such as ``1m30s``).

    Raises ``ValueError`` naming the accepted forms when ``value`` is neither.
    """
    if isinstance(value, bool):
        raise ValueError(_expected(value))
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        seconds = _parse_text(value.strip())
    else:
        raise ValueError(_expected(value))
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(_expected(value))
    return seconds


def _parse_text(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(_expected(text))
    return sum(float(n) * _UNIT_S[u] for n, u in parts)


def _expected(value: object) -> str:
    return f"expected a duration such as 500ms, 30s, 5m, 1h or 1m30s, got {quoted(value)}"
