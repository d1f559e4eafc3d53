"""How a run looks: summary.json, junit.xml, CSV, one self-contained report.html,
the history index across runs, and the output of ``slogate compare``."""

from slogate.reports.comparison import comparison_text, write_comparison
from slogate.reports.index import write_index
from slogate.reports.results import NotResults, Outcome, rerender, write_results

__all__ = [
    "NotResults",
    "Outcome",
    "comparison_text",
    "rerender",
    "write_comparison",
    "write_index",
    "write_results",
]
