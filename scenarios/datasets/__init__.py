"""Reading the data users already have: request traces (generic CSV/JSONL with
named columns, or the named formats ``mooncake``, ``burstgpt``, ``azure``) and
recorded conversations (ShareGPT JSON/JSONL, OpenAI messages JSONL).

One module per dataset kind, as vLLM's ``benchmarks/datasets`` has: each says
how its files are laid out; ``table`` reads rows with their line numbers,
``conversations`` turns conversation files into sessions, ``counts`` keeps
their token counts on disk, and ``report`` summarizes what a file gave (rows
read, skipped and why, length percentiles)."""

from slogate.scenarios.datasets import azure, burstgpt, mooncake
from slogate.scenarios.datasets.layout import Layout, TraceColumns
from slogate.scenarios.datasets.report import DatasetReport
from slogate.scenarios.datasets.table import DatasetError

TRACE_LAYOUTS: dict[str, Layout] = {m.LAYOUT.name: m.LAYOUT for m in (mooncake, burstgpt, azure)}

__all__ = ["TRACE_LAYOUTS", "DatasetError", "DatasetReport", "Layout", "TraceColumns"]
