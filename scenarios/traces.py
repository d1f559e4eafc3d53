"""Reading request traces: CSV or JSONL files with one request per row.

A trace gives arrival times and token lengths (and optionally the prefix-block
ids that published production traces use to show shared prefixes). Columns are
named by the scenario, so a trace in any layout replays after naming its columns.
Times may be seconds, milliseconds, microseconds or date-time text.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from slogate.scenarios.limits import MAX_TOKENS

DATA_DIR = Path(__file__).resolve().parent / "data"
BUILTIN_TRACES = {
    "azure-conv": DATA_DIR / "traces" / "AzureLLMInferenceTrace_conv_2023.csv",
    "azure-code": DATA_DIR / "traces" / "AzureLLMInferenceTrace_code_2023.csv",
}
TIME_UNITS = ("auto", "s", "ms", "us", "datetime")
FORMATS = ("auto", "csv", "jsonl")
_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?"
)
_BLOCK_ID = re.compile(r"[^\s,;\[\]\"']+")


class TraceError(ValueError):
    """A trace cannot be used; ``key`` names the scenario setting at fault."""

    def __init__(self, message: str, key: str = "file") -> None:
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class TraceColumns:
    """Which column holds what. Defaults are the Azure 2023 traces' names."""

    time: str = "TIMESTAMP"
    input_tokens: str = "ContextTokens"
    output_tokens: str = "GeneratedTokens"
    prefix_blocks: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    """A trace sorted by time; ``times_s`` counts from its first request."""

    source: str
    times_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_blocks: tuple[tuple[str, ...], ...] | None

    @property
    def rows(self) -> int:
        return len(self.times_s)

    @property
    def span_s(self) -> float:
        return float(self.times_s[-1])

    @property
    def mean_gap_s(self) -> float:
        """Mean inter-arrival gap; a one-row or zero-span trace counts as 1 s."""
        return self.span_s / (self.rows - 1) if self.rows > 1 and self.span_s > 0 else 1.0

    @property
    def rate_rps(self) -> float:
        return 1.0 / self.mean_gap_s


def resolve(value: str, base_dir: Path) -> Path:
    """The file a scenario means: a built-in name or a path relative to the scenario."""
    if value in BUILTIN_TRACES:
        return BUILTIN_TRACES[value]
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base_dir / path
    if not path.is_file():
        builtin = ", ".join(BUILTIN_TRACES)
        raise TraceError(f"file not found: {path} (built-in traces: {builtin})")
    return path.resolve()


def read_numbers(path: Path, column: str, fmt: str = "auto") -> np.ndarray:
    """One numeric column, e.g. for an empirical length distribution."""
    values = _column(path, column, fmt, key="column")
    return _numbers(values, column, key="column")


def load_trace(
    path: Path, columns: TraceColumns, time_unit: str = "auto", fmt: str = "auto"
) -> Trace:
    """Parse a trace; raises ``TraceError`` naming the column and row at fault."""
    times = _times(_column(path, columns.time, fmt, "columns.time"), columns.time, time_unit)
    inputs = _token_counts(
        _column(path, columns.input_tokens, fmt, "columns.input_tokens"),
        columns.input_tokens,
        key="columns.input_tokens",
    )
    outputs = _token_counts(
        _column(path, columns.output_tokens, fmt, "columns.output_tokens"),
        columns.output_tokens,
        key="columns.output_tokens",
    )
    blocks = None
    if columns.prefix_blocks is not None:
        raw = _column(path, columns.prefix_blocks, fmt, "columns.prefix_blocks")
        blocks = [_block_ids(v) for v in raw]
    order = np.argsort(times, kind="stable")
    times = times[order]
    return Trace(
        source=str(path),
        times_s=times - times[0],
        input_tokens=np.maximum(inputs[order], 1).astype(np.int64),
        output_tokens=np.maximum(outputs[order], 1).astype(np.int64),
        prefix_blocks=None if blocks is None else tuple(blocks[i] for i in order),
    )


def _column(path: Path, column: str, fmt: str, key: str) -> list[Any]:
    header, data = _table(str(path), path.stat().st_mtime_ns, _format(path, fmt))
    if column not in data:
        raise TraceError(
            f"column {column!r} not in {path.name} (columns: {', '.join(header)})", key
        )
    return data[column]


def _format(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson", ".json"):
        return "jsonl"
    if suffix in (".csv", ".txt"):
        return "csv"
    raise TraceError(f"cannot tell the format of {path.name}; set format: csv or jsonl", "format")


@functools.lru_cache(maxsize=8)
def _table(path: str, mtime_ns: int, fmt: str) -> tuple[list[str], dict[str, list[Any]]]:
    """The file as columns; cached, keyed by modification time."""
    del mtime_ns  # part of the cache key only
    try:
        return _read_jsonl(path) if fmt == "jsonl" else _read_csv(path)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TraceError(f"cannot read {path}: {exc}") from exc


def _read_csv(path: str) -> tuple[list[str], dict[str, list[Any]]]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if not header:
            raise TraceError(f"{path} is empty")
        header = [h.strip() for h in header]
        data: dict[str, list[Any]] = {h: [] for h in header}
        for row in rows:
            if row:
                for name, cell in zip(header, row, strict=False):
                    data[name].append(cell)
                for name in header[len(row) :]:
                    data[name].append(None)
    return header, data


def _read_jsonl(path: str) -> tuple[list[str], dict[str, list[Any]]]:
    records = []
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if line.strip():
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise TraceError(f"{path} line {number}: not JSON ({exc})") from exc
                if not isinstance(record, dict):
                    raise TraceError(f"{path} line {number}: expected a JSON object per line")
                records.append(record)
    header = list(dict.fromkeys(k for r in records for k in r))
    return header, {h: [r.get(h) for r in records] for h in header}


def _token_counts(values: list[Any], column: str, key: str) -> np.ndarray:
    """Token counts: numbers >= 0 and at most MAX_TOKENS (a larger one would wrap
    round in the int64 conversion and become a tiny prompt)."""
    numbers = _numbers(values, column, key)
    beyond = np.flatnonzero(numbers > MAX_TOKENS)
    if beyond.size:
        row = int(beyond[0])
        raise TraceError(
            f"row {row + 1}: {values[row]!r} tokens in column {column!r} is beyond the "
            f"limit of {MAX_TOKENS}",
            key,
        )
    return numbers


def _numbers(values: list[Any], column: str, key: str) -> np.ndarray:
    out = np.empty(len(values), dtype=np.float64)
    for i, value in enumerate(values):
        try:
            out[i] = float(value)
        except (TypeError, ValueError):
            out[i] = math.nan
        if not math.isfinite(out[i]) or out[i] < 0:
            raise TraceError(
                f"row {i + 1}: expected a number >= 0 in column {column!r}, got {value!r}", key
            )
    if not len(out):
        raise TraceError(f"column {column!r} has no rows", key)
    return out


def _times(values: list[Any], column: str, unit: str) -> np.ndarray:
    if unit == "auto":
        unit = "datetime" if values and _is_date(values[0]) else "s"
    if unit == "datetime":
        parsed = [_datetime_s(v, i, column) for i, v in enumerate(values)]
        whole = np.array([p[0] for p in parsed], dtype=np.int64)
        # seconds counted from the earliest whole second keep sub-microsecond digits
        return (whole - whole.min()).astype(np.float64) + np.array([p[1] for p in parsed])
    return _numbers(values, column, key="columns.time") * _UNIT_S[unit]


def _is_date(value: Any) -> bool:
    return isinstance(value, str) and _DATETIME.fullmatch(value.strip()) is not None


def _datetime_s(value: Any, row: int, column: str) -> tuple[int, float]:
    """Whole seconds since the epoch and the fraction, from date-time text with
    any number of fraction digits."""
    match = _DATETIME.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise TraceError(
            f"row {row + 1}: expected date-time text such as 2023-11-16 18:15:46.68 in "
            f"column {column!r}, got {value!r}",
            "columns.time",
        )
    year, month, day, hour, minute, second, fraction, zone = match.groups()
    moment = datetime(
        int(year),
        int(month),
        int(day),
        int(hour),
        int(minute),
        int(second or 0),
        tzinfo=_zone(zone),
    )
    return int(moment.timestamp()), float("0." + fraction) if fraction else 0.0


def _zone(text: str | None) -> timezone:
    if text is None or text == "Z":
        return timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def _block_ids(value: Any) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    if value is None:
        return ()
    return tuple(_BLOCK_ID.findall(str(value)))
