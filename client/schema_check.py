"""Structured outputs checked: each constrained answer against its schema,
once, after the request has ended, so the stream's reads pay nothing.

The client also tells a schema's first request from later ones: the engine
compiles a grammar when it first sees a schema and serves it from its cache
after, and the TTFT gap between the two is the compile's cost. A load
process knows what it sent itself, not what other processes sent: with N
processes a pooled schema has up to N first requests.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

from slogate.scenarios.model import Constraint

__all__ = ["SchemaCheck"]

SEEN_KEYS = 4096  # schemas remembered: a unique schema per request churns through
VALIDATORS = 256  # compiled validators kept, for pooled schemas
SHOWN_CHARS = 200  # of the broken answer, in the reason


class SchemaCheck:
    """The schemas one client has sent, and the check of their answers."""

    def __init__(self) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._validators: OrderedDict[str, Any] = OrderedDict()

    def first_sight(self, key: str) -> bool:
        """Whether ``key``'s schema is sent for the first time (then it is
        remembered as sent)."""
        seen = self._seen
        if key in seen:
            seen.move_to_end(key)
            return False
        seen[key] = None
        if len(seen) > SEEN_KEYS:
            seen.popitem(last=False)
        return True

    def problem(self, constraint: Constraint, text: str, finish_reason: str | None) -> str | None:
        """Why ``text`` breaks the constraint's schema, in one line; None when it
        meets it. An answer cut at ``max_tokens`` is named as such: the limit,
        not the engine's grammar, broke it."""
        response_format = constraint.response_format
        if response_format is None:
            return None
        try:
            document = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            cut = " (cut at max_tokens)" if finish_reason == "length" else ""
            return f"not JSON{cut}: {exc}; answer starts {text[:SHOWN_CHARS]!r}"
        if response_format.get("type") != "json_schema":
            kind = type(document).__name__
            return None if isinstance(document, dict) else f"expected a JSON object, got {kind}"
        from jsonschema.exceptions import best_match

        error = best_match(self._validator(constraint.key, response_format).iter_errors(document))
        if error is None:
            return None
        where = "$" + "".join(f"[{part!r}]" for part in error.absolute_path)
        return f"{where}: {error.message}"[: SHOWN_CHARS * 2]

    def _validator(self, key: str, response_format: dict[str, Any]) -> Any:
        """The compiled validator of the schema, made once per pooled schema."""
        cached = self._validators.get(key)
        if cached is not None:
            self._validators.move_to_end(key)
            return cached
        from jsonschema import validators

        schema = response_format["json_schema"]["schema"]
        made = self._validators[key] = validators.validator_for(schema)(schema)
        if len(self._validators) > VALIDATORS:
            self._validators.popitem(last=False)
        return made
