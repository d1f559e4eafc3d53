"""What a run saved of its requests' identity (docs/load.md, "Request
identity"), read back and checked the same way against every engine."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

HEX32, HEX16 = re.compile(r"[0-9a-f]{32}"), re.compile(r"[0-9a-f]{16}")


def saved_requests(out: Path) -> list[dict[str, Any]]:
    """The lines of a run's requests.jsonl (``--save-requests``)."""
    return [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]


def assert_identified(line: dict[str, Any]) -> None:
    """A saved request names itself: a request id and a trace id of 32 hex
    digits, a span id of 16."""
    assert HEX32.fullmatch(line["request_id"]) and HEX32.fullmatch(line["trace_id"]), line
    assert HEX16.fullmatch(line["span_id"]), line


def identified_with_log(out: Path, log_path: Path | None) -> tuple[list[dict[str, Any]], str]:
    """A run's saved requests against a real engine, each checked to name
    itself (a few at least), and the engine's log to find them in."""
    lines = saved_requests(out)
    assert len(lines) >= 4
    for line in lines:
        assert_identified(line)
    assert log_path is not None
    return lines, log_path.read_text(errors="replace")
