"""Mooncake traces (Kimi's serving traces, FAST 2025): JSONL with ``timestamp``
in milliseconds, ``input_length``, ``output_length`` and ``hash_ids``, the ids
of the prompt's 512-token blocks (equal ids: a shared prefix)."""

from slogate.scenarios.datasets.layout import Layout, TraceColumns

LAYOUT = Layout(
    name="mooncake",
    file_format="jsonl",
    columns=TraceColumns(
        time="timestamp",
        input_tokens="input_length",
        output_tokens="output_length",
        prefix_blocks="hash_ids",
    ),
    time_unit="ms",
)
