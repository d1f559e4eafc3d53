"""`slogate compare BASE NEW`: per-metric deltas and a regression verdict.

Exit codes: 0 no regression, 1 regression, 2 a folder is not a results folder
or the runs share no scenario, 3 a gated latency rose by no more than the two
runs' load generators can have moved it (0 with ``--allow-uncertain``). Two
repeat sets (``slogate run --repeat``) compare on their runs' spread
(:func:`slogate.studies.repeats.compare_repeats`); a set against a single run
is refused (2). The comparison is written into NEW as comparison.json and
comparison.html.

BASE may also be another tool's result file: a vLLM ``bench serve
--save-result`` JSON or a GuideLLM report (``FILE#K`` for its K-th benchmark),
told apart by content (:mod:`slogate.analysis.documents.other_tools`); a file
that is neither exits 2 naming it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slogate.analysis.documents.other_tools import read_other, split_index
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.verdict.compare import EXIT_BAD_INPUT, Comparison, compare, compare_other
from slogate.reports import comparison_text, write_comparison
from slogate.studies.repeats import compare_repeats, read_repeats


def comparison_of(args: argparse.Namespace) -> Comparison:
    """Raises ValueError (or FileNotFoundError) naming what BASE or NEW is not."""
    if split_index(args.base)[0].is_file():
        other = read_other(args.base)
        if read_repeats(Path(args.new)) is not None:
            raise ValueError("NEW is a repeat set: compare another tool's result with one run")
        return compare_other(
            other, RunData.load(args.new), args.tolerance, allow_uncertain=args.allow_uncertain
        )
    base_set, new_set = read_repeats(Path(args.base)), read_repeats(Path(args.new))
    if base_set is not None and new_set is not None:
        return compare_repeats(base_set, new_set, args.tolerance, args.base, args.new)
    if base_set is not None or new_set is not None:
        which = "BASE" if base_set is not None else "NEW"
        raise ValueError(
            f"{which} is a repeat set and the other a single run: compare a repeat set "
            "with a repeat set (their spreads), or one of its runs with a run"
        )
    base, new = RunData.load(args.base), RunData.load(args.new)
    return compare(base, new, tolerance=args.tolerance, allow_uncertain=args.allow_uncertain)


def compare_command(args: argparse.Namespace) -> int:
    try:
        comparison = comparison_of(args)
    except (FileNotFoundError, ValueError) as error:
        print(f"slogate compare: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(comparison_text(comparison, all_rows=args.all))
    files = write_comparison(args.new, comparison)
    print(f"slogate compare: {files['html']}")
    return comparison.exit_code
