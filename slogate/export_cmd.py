"""`slogate export DIR --format llm-d-report|csv`: a results folder in another tool's format.

Exit codes: 0 written, 2 DIR is not a run, sweep or tune folder (or its
document is not slogate's), 3 a report did not validate against llm-d's
schema (slogate's mapping is wrong: nothing invalid is written) or a file
could not be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
from slogate.reports.folder_export import FORMATS, export
from slogate.reports.llmd_report import InvalidReport
from slogate.reports.results import NotResults


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", help="a run's, sweep's or tune's results folder")
    p.add_argument("--format", choices=FORMATS, required=True, help="what to write")
    p.add_argument(
        "--out",
        default=None,
        help="folder to write into (default: DIR/llm-d-report for llm-d reports, DIR for CSV)",
    )


def export_command(args: argparse.Namespace) -> int:
    try:
        files = export(Path(args.dir), args.format, None if args.out is None else Path(args.out))
    except NotResults as error:
        print(f"slogate export: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except (InvalidReport, OSError) as error:
        print(f"slogate export: {error}", file=sys.stderr)
        return EXIT_INVALID
    for file in files:
        print(f"slogate export: {file}")
    return 0
