"""`slogate prune [ROOT] --keep N | --older-than AGE`: retention for a results root.

Keeps the newest N runs of each scenario set and target and/or drops runs older
than AGE, then rewrites the root's index.html so it lists only what is left.
Only folders holding a slogate ``summary.json`` are ever removed; a run
folder that is a symbolic link loses the link, never what it names.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from datetime import datetime, timezone
from pathlib import Path

from slogate.analysis.documents.history import RESULTS_ROOT, read_runs, runs_to_prune
from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
from slogate.locustfiles.argtypes import age, non_negative_int
from slogate.reports import write_index


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "root", nargs="?", default=str(RESULTS_ROOT), help=f"results root (default {RESULTS_ROOT})"
    )
    p.add_argument("--keep", type=non_negative_int, help="newest runs kept per scenario and target")
    p.add_argument("--older-than", type=age, help="also remove runs older than this: 30d, 12h")
    p.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")


def prune_command(args: argparse.Namespace) -> int:
    if args.keep is None and args.older_than is None:
        print("slogate prune: give --keep N, --older-than AGE or both", file=sys.stderr)
        return EXIT_CONFIG
    root = Path(args.root)
    if not root.is_dir():
        print(f"slogate prune: {root}: not a folder", file=sys.stderr)
        return EXIT_CONFIG
    doomed = runs_to_prune(read_runs(root), args.keep, args.older_than, datetime.now(timezone.utc))
    failed = 0
    for run in doomed:
        print(f"slogate prune: {'would remove' if args.dry_run else 'removing'} {run.folder}")
        if not args.dry_run:
            failed += not remove(run.folder)
    if not args.dry_run:
        write_index(root)
    print(f"slogate prune: {len(doomed)} run(s) {'to remove' if args.dry_run else 'removed'}")
    if failed:
        print(f"slogate prune: {failed} run(s) could not be removed", file=sys.stderr)
        return EXIT_INVALID
    return 0


def remove(folder: Path) -> bool:
    """Remove a run's folder; a symbolic link only as a link (the run it
    names may lie outside the root, and is not the root's to delete). A
    folder that cannot be removed is named, and the others still go."""
    try:
        if folder.is_symlink():
            folder.unlink()
        else:
            shutil.rmtree(folder)
    except OSError as error:
        print(f"slogate prune: cannot remove {folder}: {error}", file=sys.stderr)
        return False
    return True
