"""Rows of a CSV or JSONL file as columns, each row with the file line it
starts on, so a bad value can be named by file, line and field."""

from __future__ import annotations

import csv
import functools
import math
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from slogate.scenarios.errors import quoted

FORMATS = ("csv", "jsonl")


class DatasetError(ValueError):
    """A data file cannot be used; ``key`` names the scenario setting at fault."""

    def __init__(self, message: str, key: str = "file") -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True, eq=False)
class Table:
    """A file's rows by column; ``lines[i]`` is the line row ``i`` starts on."""

    path: Path
    header: tuple[str, ...]
    columns: dict[str, list[Any]]
    lines: tuple[int, ...]

    @property
    def rows(self) -> int:
        return len(self.lines)

    def column(self, name: str, key: str) -> list[Any]:
        if name not in self.columns:
            raise DatasetError(
                f"column {name!r} not in {self.path.name} (columns: {', '.join(self.header)})",
                key,
            )
        return self.columns[name]

    def where(self, row: int, field: str) -> str:
        """``file line N, field 'X'``: where a bad value sits."""
        return f"{self.path.name} line {self.lines[row]}, field {field!r}"

    def numbers(self, name: str, key: str, limit: float = math.inf) -> array[float]:
        """A column as numbers >= 0; a bad cell is named by line and field. A
        number beyond ``limit`` is refused too: a token count past int64 would
        wrap round in the conversion and replay as a tiny prompt. A flat array
        of doubles, which numpy reads without a copy where requests are made
        (checking a scenario needs no numpy)."""
        values = self.column(name, key)
        out = array("d", bytes(8 * len(values)))
        for i, value in enumerate(values):
            try:
                out[i] = float(value)
            except (TypeError, ValueError):
                out[i] = math.nan
            if not math.isfinite(out[i]) or out[i] < 0:
                raise DatasetError(
                    f"{self.where(i, name)}: expected a number >= 0, got {quoted(value)}", key
                )
            if out[i] > limit:
                raise DatasetError(
                    f"{self.where(i, name)}: {quoted(value)} is beyond the limit of {limit:.0f}",
                    key,
                )
        return out


def file_format(path: Path, fmt: str) -> str:
    """``csv`` or ``jsonl``: as given, or told by the file's suffix for ``auto``."""
    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".csv", ".txt"):
        return "csv"
    raise DatasetError(f"cannot tell the format of {path.name}; set format: csv or jsonl", "format")


def read_table(path: Path, fmt: str) -> Table:
    """The file as a table; cached per process, keyed by modification time, so
    every scenario and distribution naming one file reads it once."""
    return _cached(str(path), path.stat().st_mtime_ns, file_format(path, fmt))


@functools.lru_cache(maxsize=8)
def _cached(path: str, mtime_ns: int, fmt: str) -> Table:
    del mtime_ns  # part of the cache key only
    try:
        return _read_jsonl(Path(path)) if fmt == "jsonl" else _read_csv(Path(path))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from exc


def _read_csv(path: Path) -> Table:
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if not header:
            raise DatasetError(f"{path.name} is empty")
        names = tuple(h.strip() for h in header)
        data: dict[str, list[Any]] = {h: [] for h in names}
        lines = []
        start = rows.line_num + 1
        for row in rows:
            if row:
                lines.append(start)
                for name, cell in zip(names, row, strict=False):
                    data[name].append(cell)
                for name in names[len(row) :]:
                    data[name].append(None)
            start = rows.line_num + 1
    return Table(path, names, data, tuple(lines))


def _read_jsonl(path: Path) -> Table:
    records, lines = [], []
    for number, record in json_lines(path):
        if not isinstance(record, dict):
            raise DatasetError(f"{path.name} line {number}: expected a JSON object per line")
        records.append(record)
        lines.append(number)
    header = tuple(dict.fromkeys(k for r in records for k in r))
    return Table(path, header, {h: [r.get(h) for r in records] for h in header}, tuple(lines))


def json_lines(path: Path) -> list[tuple[int, Any]]:
    """``(line number, value)`` of each non-blank line of a JSONL file."""
    out = []
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                try:
                    out.append((number, orjson.loads(line)))
                except orjson.JSONDecodeError as exc:
                    raise DatasetError(f"{path.name} line {number}: not JSON ({exc})") from exc
    return out


class Skip(Exception):
    """A row (or conversation) that is well-formed but cannot be replayed; the
    message is the reason ``slogate scenario check`` counts it under."""


def message_objects(
    record: dict[str, Any], key: str, where: str, keys: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each message of a conversation record's ``key`` list with its field path
    (``key[i]``), for the format's own checks; ``keys`` names what a message
    holds, for the error. ``where`` is ``file line N``."""
    items = record.get(key)
    if not isinstance(items, list):
        raise DatasetError(
            f"{where}, field {key!r}: expected a list of messages, got {quoted(items)}"
        )
    for i, item in enumerate(items):
        field = f"{key}[{i}]"
        if not isinstance(item, dict):
            raise DatasetError(
                f"{where}, field {field!r}: expected an object with {keys}, got {quoted(item)}"
            )
        yield field, item


def string_field(item: dict[str, Any], name: str, where: str, field: str) -> str:
    """``item[name]``, which must be a string."""
    value = item.get(name)
    if not isinstance(value, str):
        raise DatasetError(
            f"{where}, field '{field}.{name}': expected a string, got {quoted(value)}"
        )
    return value
