"""A JSON Schema the structured-output tests share: an enum, an array of
bounded integers and a nested object, every key required."""

from __future__ import annotations

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
