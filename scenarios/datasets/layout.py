"""Where a trace keeps each field: its columns, time unit and file format.

A named format (``mooncake``, ``burstgpt``, ``azure``) is a fixed layout, so
its files replay without naming columns; the generic ``csv``/``jsonl`` take
the columns a scenario names, or find them among the names traces commonly use.
"""

from __future__ import annotations

from dataclasses import dataclass

# Names used by published traces and logging tools, looked up in this order
# when a generic trace does not name its columns.
KNOWN_COLUMNS = {
    "time": ("TIMESTAMP", "timestamp", "Timestamp", "time", "arrival_time", "created"),
    "input_tokens": (
        "ContextTokens", "input_length", "input_tokens", "prompt_tokens",
        "num_prefill_tokens", "Request tokens", "prompt_len", "input_len",
    ),
    "output_tokens": (
        "GeneratedTokens", "output_length", "output_tokens", "completion_tokens",
        "num_decode_tokens", "Response tokens", "output_len",
    ),
    "model": ("Model", "model"),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class TraceColumns:
    """Which column holds what; ``None`` means: find it by a known name (a
    trace without any known time column has no times)."""

    time: str | None = None
    input_tokens: str | None = None
    output_tokens: str | None = None
    prefix_blocks: str | None = None
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Layout:
    """A named trace format: its file format, columns and time unit."""

    name: str
    file_format: str
    columns: TraceColumns
    time_unit: str

    def fits(self, header: tuple[str, ...], file_format: str) -> bool:
        """Whether a file of this format with this header is in this layout."""
        wanted = [c for c in vars_of(self.columns) if c is not None]
        return file_format == self.file_format and all(c in header for c in wanted)


def vars_of(columns: TraceColumns) -> tuple[str | None, ...]:
    return (
        columns.time,
        columns.input_tokens,
        columns.output_tokens,
        columns.prefix_blocks,
        columns.model,
    )
