"""Table-driven checking of the mappings a scenario file is made of.

Each section of a file is described by a table ``{key: Field}``; a ``Reader``
walks the file against those tables, converts values (durations, numbers) and
collects every problem with its key path instead of stopping at the first, so one
run of ``slogate scenario check`` lists everything wrong with a file.

Each check and nested section also carries its JSON Schema fragment (``shape``),
so ``slogate schema scenario`` is generated from the very tables the loader
reads with (scenarios/json_schema.py). The checking stays hand-written rather
than pydantic: importing pydantic and building the models cost 0.4-0.5 s of
start-up in every load process when it was measured.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slogate.scenarios.errors import Problem, quoted
from slogate.scenarios.limits import MAX_SECONDS
from slogate.scenarios.units import DURATION_PATTERN, parse_duration

REQUIRED: Any = object()
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
Shape = dict[str, Any]  # a JSON Schema fragment


class Invalid(Exception):
    """A value does not fit; the message says what was expected."""


AUTO = "auto"  # decided by what the run finds (a warm-up, per-chunk usage), not given


@dataclass(frozen=True, slots=True)
class Check:
    """Converts one value or raises ``Invalid`` saying what it ``expects``;
    ``shape`` is the JSON Schema of the values it accepts, as far as JSON
    Schema can say it."""

    expects: str
    convert: Callable[[Any], Any]
    shape: Shape

    def __call__(self, value: Any) -> Any:
        try:
            return self.convert(value)
        except (ValueError, TypeError) as exc:
            raise Invalid(f"expected {self.expects}, got {quoted(value)}") from exc

    def shaped(self, shape: Shape) -> Check:
        """The same check, described by a narrower schema: a section kept as a
        raw mapping here and read by its own table later (a scenario's load)."""
        return replace(self, shape=shape)


@dataclass(frozen=True, slots=True)
class Field:
    """One key of a section: its check and default. A ``nested`` field's check is
    a builder ``(reader, value, path) -> object | None`` for a whole sub-section,
    and its default is raw input (as a file would write it) fed to that builder.
    ``shape`` is the JSON Schema of what the file may write there."""

    check: Callable[..., Any]
    shape: Shape
    default: Any = None
    nested: bool = False


def required(check: Check) -> Field:
    return Field(check, check.shape, REQUIRED)


def optional(check: Check, default: Any = None) -> Field:
    return Field(check, check.shape, default)


def nested(builder: Callable[..., Any], shape: Shape, default: Any = None) -> Field:
    return Field(builder, shape, default, nested=True)


def section_shape(fields: Mapping[str, Field]) -> Shape:
    """The JSON Schema of a section ``Reader.section`` reads with ``fields``:
    unknown keys rejected, required keys required, and an optional key may be
    written empty (``null``), which the reader takes as absent."""
    properties = {key: _property(field) for key, field in fields.items()}
    needed = [key for key, field in fields.items() if field.default is REQUIRED]
    shape: Shape = {"type": "object", "properties": properties, "additionalProperties": False}
    return {**shape, "required": needed} if needed else shape


def _property(field: Field) -> Shape:
    if field.default is REQUIRED:
        return field.shape
    shape: Shape = {"anyOf": [field.shape, {"type": "null"}]}
    if field.default is not None:
        shape["default"] = (
            list(field.default) if isinstance(field.default, tuple) else field.default
        )
    return shape


def tagged_shape(tag: str, shapes: Mapping[str, Shape]) -> Shape:
    """A mapping whose ``tag`` key picks its table (a workload's ``kind``, a
    distribution's ``dist``): each tag value's schema applies when it is given."""
    return {
        "type": "object",
        "required": [tag],
        "properties": {tag: {"enum": list(shapes)}},
        "allOf": [
            {"if": {"properties": {tag: {"const": name}}}, "then": shape}
            for name, shape in shapes.items()
        ],
    }


def number(*, gt: float | None = None, ge: float | None = None, le: float | None = None) -> Check:
    return _numeric(gt=gt, ge=ge, le=le, integer=False)


def integer(*, ge: int | None = None, le: int | None = None) -> Check:
    return _numeric(gt=None, ge=ge, le=le, integer=True)


def _numeric(*, gt: float | None, ge: float | None, le: float | None, integer: bool) -> Check:
    bounds = [f"> {gt:g}" if gt is not None else "", f">= {ge:g}" if ge is not None else ""]
    bounds.append(f"<= {le:g}" if le is not None else "")
    noun = "an integer" if integer else "a number"
    expects = " ".join([noun, " and ".join(b for b in bounds if b)]).strip()

    def convert(value: Any) -> int | float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError
        if not math.isfinite(value) or (integer and value != int(value)):
            raise ValueError
        if (gt is not None and value <= gt) or (ge is not None and value < ge):
            raise ValueError
        if le is not None and value > le:
            raise ValueError
        return int(value) if integer else float(value)

    shape: Shape = {"type": "integer" if integer else "number"}
    bounds_shape = {"exclusiveMinimum": gt, "minimum": ge, "maximum": le}
    shape.update({key: bound for key, bound in bounds_shape.items() if bound is not None})
    return Check(expects, convert, shape)


def duration(*, positive: bool = False) -> Check:
    """Seconds from ``30s``-style text or a number; zero allowed unless ``positive``."""

    def convert(value: Any) -> float:
        seconds = parse_duration(value)
        if (positive and seconds <= 0) or seconds > MAX_SECONDS:
            raise ValueError
        return seconds

    qualifier = "a duration > 0" if positive else "a duration"
    seconds: Shape = {"type": "number", "maximum": MAX_SECONDS}
    seconds["exclusiveMinimum" if positive else "minimum"] = 0
    shape = {"anyOf": [seconds, {"type": "string", "pattern": DURATION_PATTERN}]}
    return Check(f"{qualifier} up to 7 days, such as 500ms, 30s, 5m or 1h", convert, shape)


def or_auto(plain: Check) -> Check:
    """``plain``'s values, or ``auto``: decided later, by what the run finds."""

    def convert(value: Any) -> Any:
        return AUTO if value == AUTO else plain.convert(value)

    return Check(f"{AUTO} or {plain.expects}", convert, {"anyOf": [{"const": AUTO}, plain.shape]})


def warmup() -> Check:
    """A warm-up: a duration, or ``auto`` (found after the run, analysis/measurement/warmup.py)."""
    return or_auto(duration())


def choice(*options: str) -> Check:
    def convert(value: Any) -> str:
        if value not in options:
            raise ValueError
        return value

    return Check("one of " + ", ".join(options), convert, {"enum": list(options)})


def _strict(kind: type, value: Any) -> Any:
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise TypeError
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError
    return value


def _string_mapping(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise TypeError
    return dict(value)


def _nonempty_list(value: Any) -> list:
    if not isinstance(value, list) or not value:
        raise ValueError
    return value


def _text_list(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError
    return tuple(value)


def list_of(items: Shape | None = None) -> Check:
    """A non-empty list; ``items`` is the schema of each entry, read later by
    its own table (a load's stages, a mix's scenarios)."""
    shape: Shape = {"type": "array", "minItems": 1}
    return Check("a non-empty list", _nonempty_list, {**shape, "items": items} if items else shape)


def pattern(regex: re.Pattern[str]) -> str:
    """A JSON Schema pattern matching the whole text, as ``regex.fullmatch`` does."""
    return f"^(?:{regex.pattern})$"


TEXT_SHAPE: Shape = {"type": "string", "pattern": r"\S"}
LIST = list_of()
TEXT_LIST = Check(
    "a non-empty list of strings",
    _text_list,
    {"type": "array", "minItems": 1, "items": {"type": "string"}},
)
BOOLEAN = Check("true or false", lambda v: _strict(bool, v), {"type": "boolean"})
TEXT = Check("a non-empty string", _text, TEXT_SHAPE)
NAME = Check(
    "a name of letters, digits, '_', '.' or '-'",
    _name,
    {"type": "string", "pattern": pattern(_NAME)},
)
MAPPING = Check("a mapping of string keys", _string_mapping, {"type": "object"})


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


class Reader:
    """Reads one file's mappings against field tables, gathering problems.

    ``base_dir`` is where relative paths in the file (traces, tokenizers) start.
    ``notes`` maps a key path to a remark appended to any problem found there:
    the loader uses it to say a value came from a command-line override.
    """

    def __init__(self, file: str, base_dir: Path, notes: Mapping[str, str] | None = None) -> None:
        self.file = file
        self.base_dir = base_dir
        self.notes = dict(notes or {})
        self.problems: list[Problem] = []

    def problem(self, path: str, message: str) -> None:
        note = self.notes.get(path)
        self.problems.append(Problem(self.file, path, f"{message} ({note})" if note else message))

    def section(
        self, value: Any, path: str, fields: Mapping[str, Field], partial: bool = False
    ) -> dict[str, Any] | None:
        """The section's values with defaults filled in, or ``None`` when it (or
        anything nested in it) had a problem. ``partial`` returns what could be
        read even then (failed keys are ``None``), to check further sections."""
        before = len(self.problems)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            keys = ", ".join(fields)
            self.problem(path, f"expected a mapping with keys among {keys}, got {quoted(value)}")
            return None
        for key in value:
            if key not in fields:
                self.problem(join(path, str(key)), _unknown_key(str(key), fields))
        out: dict[str, Any] = {}
        for key, field in fields.items():
            out[key] = self._field(value.get(key), join(path, key), field)
        return out if partial or len(self.problems) == before else None

    def _field(self, raw: Any, path: str, field: Field) -> Any:
        if raw is None and field.nested and field.default not in (None, REQUIRED):
            raw = field.default
        if raw is None:
            if field.default is REQUIRED:
                expects = field.check.expects if isinstance(field.check, Check) else "a mapping"
                self.problem(path, f"missing; expected {expects}")
            return None if field.default is REQUIRED else field.default
        if field.nested:
            return field.check(self, raw, path)
        try:
            return field.check(raw)
        except Invalid as exc:
            self.problem(path, str(exc))
            return None

    def items(self, value: Any, path: str, what: str) -> list[tuple[str, Any]]:
        """The entries of a list with their paths; a problem if it is not a list."""
        if not isinstance(value, list) or not value:
            self.problem(path, f"expected a non-empty list of {what}, got {quoted(value)}")
            return []
        return [(join(path, i), item) for i, item in enumerate(value)]


def _unknown_key(key: str, fields: Mapping[str, Field]) -> str:
    close = difflib.get_close_matches(key, list(fields), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown key; expected one of: {', '.join(fields)}{hint}"
