"""Reading request traces: CSV or JSONL files with one request per row.

A trace gives token lengths, and usually arrival times and the prefix-block
ids that published production traces use to show shared prefixes. Named
formats (``mooncake``, ``burstgpt``, ``azure``) need no columns; a generic
CSV or JSONL names its columns or uses names traces commonly use. A trace
without a time column replays in closed loop or at a synthetic arrival rate.
Times may be seconds, milliseconds, microseconds or date-time text.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slogate.scenarios.datasets import (
    TRACE_LAYOUTS,
    DatasetError,
    DatasetReport,
    Layout,
    TraceColumns,
)
from slogate.scenarios.datasets.layout import KNOWN_COLUMNS
from slogate.scenarios.datasets.report import Lengths
from slogate.scenarios.datasets.table import Table, file_format, read_table
from slogate.scenarios.errors import quoted
from slogate.scenarios.limits import MAX_TOKENS

if TYPE_CHECKING:  # numpy only where requests are made: `scenario check` starts faster
    import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data"
BUILTIN_TRACES = {
    "azure-conv": DATA_DIR / "traces" / "AzureLLMInferenceTrace_conv_2023.csv",
    "azure-code": DATA_DIR / "traces" / "AzureLLMInferenceTrace_code_2023.csv",
}
TIME_UNITS = ("auto", "s", "ms", "us", "datetime")
FORMATS = ("auto", "csv", "jsonl")
TRACE_FORMATS = (*FORMATS, *TRACE_LAYOUTS)
FAILED = ("keep", "skip")
FAILED_REASON = "failed request (0 output tokens)"
_UNIT_S = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
    r"\s*(Z|[+-]\d{2}:?\d{2})?"
)
_BLOCK_ID = re.compile(r"[^\s,;\[\]\"']+")

TraceError = DatasetError


@dataclass(frozen=True, slots=True, eq=False)
class Trace:
    """A trace sorted by time; ``times_s`` counts from its first request, or is
    ``None`` for a trace without times (kept in file order)."""

    source: str
    times_s: np.ndarray | None
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    prefix_blocks: tuple[tuple[str, ...], ...] | None
    report: DatasetReport | None = None

    @property
    def rows(self) -> int:
        return len(self.input_tokens)

    @property
    def has_times(self) -> bool:
        return self.times_s is not None

    @property
    def span_s(self) -> float:
        return float(self.times_s[-1]) if self.times_s is not None else 0.0

    @property
    def mean_gap_s(self) -> float:
        """Mean inter-arrival gap; a one-row, zero-span or timeless trace counts as 1 s."""
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


def read_numbers(path: Path, column: str, fmt: str = "auto") -> array[float]:
    """One numeric column, e.g. for an empirical length distribution."""
    table = read_table(path, fmt)
    values = table.numbers(column, key="column")
    if not len(values):
        raise TraceError(f"column {column!r} of {path.name} has no rows", "column")
    return values


def load_trace(
    path: Path,
    columns: TraceColumns | None = None,
    time_unit: str = "auto",
    fmt: str = "auto",
    failed: str = "keep",
    models: tuple[str, ...] = (),
) -> Trace:
    """Parse a trace in a named format or a generic one; raises ``TraceError``
    naming the file, line and field at fault. ``failed: skip`` leaves out rows
    with 0 output tokens (failed requests, as BurstGPT records them);
    ``models`` keeps only the rows of those models."""
    import numpy as np

    layout = TRACE_LAYOUTS.get(fmt)
    if layout is not None:
        fmt = layout.file_format
    table = read_table(path, fmt)
    if layout is None and columns is None and time_unit == "auto":
        layout = recognized(table, file_format(path, fmt))
    if layout is not None:
        columns, time_unit = layout.columns, layout.time_unit
    if not table.rows:
        raise TraceError(f"{path.name} has no rows")
    named = layout is not None
    names = _columns(table, columns or TraceColumns(), named)
    # _columns raises where a token column is neither named nor found
    assert names.input_tokens is not None and names.output_tokens is not None
    inputs = np.frombuffer(
        table.numbers(names.input_tokens, _key("input_tokens", named), MAX_TOKENS)
    )
    outputs = np.frombuffer(
        table.numbers(names.output_tokens, _key("output_tokens", named), MAX_TOKENS)
    )
    times = None if names.time is None else _times(table, names.time, time_unit, named)
    blocks = None
    if names.prefix_blocks is not None:
        raw = table.column(names.prefix_blocks, _key("prefix_blocks", named))
        blocks = [_block_ids(v) for v in raw]
    keep, skipped = _kept(table, names, outputs, failed, models, named)
    order = np.flatnonzero(keep)
    if times is not None:
        order = order[np.argsort(times[order], kind="stable")]
        times = times[order] - times[order[0]]
    trace = Trace(
        source=str(path),
        times_s=times,
        input_tokens=np.maximum(inputs[order], 1).astype(np.int64),
        output_tokens=np.maximum(outputs[order], 1).astype(np.int64),
        prefix_blocks=None if blocks is None else tuple(blocks[i] for i in order),
    )
    failed_kept = int((outputs[order] == 0).sum())
    report = _report(path, table.rows, skipped, trace, names, failed_kept, layout)
    return replace(trace, report=report)


def _kept(
    table: Table,
    names: TraceColumns,
    outputs: np.ndarray,
    failed: str,
    models: tuple[str, ...],
    named: bool,
) -> tuple[np.ndarray, dict[str, int]]:
    """Which rows replay, and how many were left out for each reason."""
    import numpy as np

    keep = np.ones(table.rows, dtype=bool)
    skipped = {}
    if models:
        if names.model is None:
            raise TraceError(
                f"models: needs a model column; {table.path.name} has none (columns: "
                f"{', '.join(table.header)}); name it in workload.columns.model",
                "models",
            )
        column = table.column(names.model, _key("model", named))
        keep &= np.array([str(m).strip() in models for m in column], dtype=bool)
        skipped[f"model not in models ({', '.join(models)})"] = int(table.rows - keep.sum())
    if failed == "skip":
        ok = outputs > 0
        skipped[FAILED_REASON] = int((keep & ~ok).sum())
        keep &= ok
    if not keep.any():
        raise TraceError(
            f"{table.path.name}: no row left to replay "
            f"({'; '.join(f'{n} {why}' for why, n in skipped.items())})",
            "file",
        )
    return keep, skipped


def recognized(table: Table, fmt: str) -> Layout | None:
    """The named layout a file is in when it has all of that layout's columns:
    a Mooncake file read as plain JSONL would take milliseconds for seconds."""
    return next((lay for lay in TRACE_LAYOUTS.values() if lay.fits(table.header, fmt)), None)


def _key(field: str, named: bool) -> str:
    """The scenario setting a bad column or cell is blamed on: the file itself
    for a named format (its columns are fixed), else ``columns.<field>``."""
    return "file" if named else f"columns.{field}"


def _columns(table: Table, given: TraceColumns, named: bool) -> TraceColumns:
    """The columns to read: as named (a named format's must all exist), else the
    first known name present. A missing time column leaves the trace timeless."""
    found: dict[str, str | None] = {}
    for field in ("time", "input_tokens", "output_tokens", "prefix_blocks", "model"):
        name = getattr(given, field)
        key = _key(field, named)
        if name is not None:
            table.column(name, key)  # raises naming the file's columns
        elif field in KNOWN_COLUMNS:
            name = next((n for n in KNOWN_COLUMNS[field] if n in table.columns), None)
            if name is None and field in ("input_tokens", "output_tokens"):
                hint = ""
                if {"conversations", "messages"} & set(table.header):
                    hint = " (a file of recorded conversations replays with kind: conversations)"
                raise TraceError(
                    f"no {field.replace('_', ' ')} column in {table.path.name} (columns: "
                    f"{', '.join(table.header)}); name it in workload.columns.{field}{hint}",
                    key,
                )
        found[field] = name
    return TraceColumns(**found)


def _report(
    path: Path,
    read: int,
    skipped: dict[str, int],
    trace: Trace,
    names: TraceColumns,
    failed_kept: int,
    layout: Layout | None,
) -> DatasetReport:
    notes = [f"format: {layout.name}"] if layout is not None else []
    if trace.times_s is None:
        notes.append(
            "no time column: replays in closed loop (load.users) or at a rate "
            "(load.rate with arrival poisson, gamma or constant), not arrival: trace"
        )
    else:
        notes.append(
            f"times from column {names.time!r}: span {trace.span_s:.6g} s, "
            f"{trace.rate_rps:.4g} requests/s"
        )
    if failed_kept:
        notes.append(f"{failed_kept} rows with 0 output tokens are replayed with max_tokens 1")
    if trace.prefix_blocks is not None:
        notes.append(f"prefix blocks from column {names.prefix_blocks!r}")
    lengths = (
        Lengths.of("input tokens", trace.input_tokens),
        Lengths.of("output tokens", trace.output_tokens),
    )
    return DatasetReport(path.name, "rows", read, skipped, lengths, tuple(notes))


def _times(table: Table, column: str, unit: str, named: bool) -> np.ndarray:
    import numpy as np

    key = _key("time", named)
    values = table.column(column, key)
    if unit == "auto":
        unit = "datetime" if values and _is_date(values[0]) else "s"
    if unit == "datetime":
        parsed = [_datetime_s(table, i, column, key) for i in range(len(values))]
        whole = np.array([p[0] for p in parsed], dtype=np.int64)
        # seconds counted from the earliest whole second keep sub-microsecond digits
        return (whole - whole.min()).astype(np.float64) + np.array([p[1] for p in parsed])
    return np.asarray(table.numbers(column, key)) * _UNIT_S[unit]


def _is_date(value: Any) -> bool:
    return isinstance(value, str) and _DATETIME.fullmatch(value.strip()) is not None


def _datetime_s(table: Table, row: int, column: str, key: str) -> tuple[int, float]:
    """Whole seconds since the epoch and the fraction, from date-time text with
    any number of fraction digits."""
    value = table.columns[column][row]
    match = _DATETIME.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise TraceError(
            f"{table.where(row, column)}: expected date-time text such as "
            f"2023-11-16 18:15:46.68, got {quoted(value)}",
            key,
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
