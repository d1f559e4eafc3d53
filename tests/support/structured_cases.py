"""What the structured-output tests share: a JSON Schema (an enum, an array
of bounded integers and a nested object, every key required) and a scenario
that constrains a share of its requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

SCHEMA = {
    "type": "object",
    "properties": {
        "color": {"type": "string", "enum": ["red", "green"]},
        "sizes": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 9}},
        "meta": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
    "required": ["color", "sizes", "meta"],
    "additionalProperties": False,
}


def structured_scenario(folder: Path, **changes: Any) -> Path:
    """A chat scenario that constrains half its requests with two pooled
    generated schemas (each has one first-seen request per load process, the
    rest hit the engine's grammar cache) and gates validity at 99%;
    ``changes`` update its top-level sections."""
    data: dict[str, Any] = {
        "name": "so",
        "api": "chat",
        "workload": {
            "kind": "chat",
            "turns": 1,
            "input_tokens": 256,
            "output_tokens": 160,
            "think_time_s": 0.1,
        },
        "structured": {"share": 0.5, "pool": 2},
        "load": {"users": 6, "spawn_rate": 6, "duration": "12s"},
        "slo": {"schema_validity": {"min": 0.99}},
    }
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(data.get(key), dict) else value
    path = folder / "so.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
