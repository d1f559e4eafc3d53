"""How a run looks: summary.json, junit.xml, CSV, one self-contained report.html,
the history index across runs, and the output of ``slogate compare``."""

from reports.comparison import comparison_text, write_comparison
from reports.index import write_index
from reports.results import Outcome, rerender, write_results

__all__ = [
    "Outcome",
    "comparison_text",
    "rerender",
    "write_comparison",
    "write_index",
    "write_results",
]
