"""`slogate compare BASE NEW`: per-metric deltas and a regression verdict.

Exit codes: 0 no regression, 1 regression, 2 a folder is not a results folder
or the runs share no scenario, 3 a gated latency rose by no more than the two
runs' load generators can have moved it (0 with ``--allow-uncertain``). The
comparison is written into NEW as comparison.json and comparison.html.
"""

from __future__ import annotations

import argparse
import sys

from slogate.analysis.compare import EXIT_BAD_INPUT, compare
from slogate.analysis.rundata import RunData
from slogate.reports import comparison_text, write_comparison


def compare_command(args: argparse.Namespace) -> int:
    try:
        base, new = RunData.load(args.base), RunData.load(args.new)
        comparison = compare(
            base, new, tolerance=args.tolerance, allow_uncertain=args.allow_uncertain
        )
    except (FileNotFoundError, ValueError) as error:
        print(f"slogate compare: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(comparison_text(comparison, all_rows=args.all))
    files = write_comparison(args.new, comparison)
    print(f"slogate compare: {files['html']}")
    return comparison.exit_code
