"""One trial of an experiment or sweep: a plain `slogate run` at one setting.

Each trial is its own `slogate run` process writing its own results folder
(summary, report, data), so any trial can be opened, re-rendered or compared
like a run; the study (:mod:`slogate.studies`) only reads those folders. The engine
(:mod:`slogate.target`) is the one the user names (``--host``) or a
simulated engine started for the trials that share a profile.

Apart from :mod:`slogate.studies.trials` by design: this module starts a
process and declares command-line options, which the studies room knows
nothing of (the CLI passes :func:`run_trial` in as a callable); that one only
reads the folders a trial leaves, so a study can be rebuilt from them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slogate.locustfiles.argtypes import (
    non_negative_int,
    positive_duration,
    positive_float,
    positive_int,
)
from slogate.locustfiles.options import PRICE
from slogate.studies.trials import TrialResult, finished_trial


def add_trial_options(p: argparse.ArgumentParser) -> None:
    """Options every experiment and sweep shares: where to send, for how long, cost."""
    p.add_argument("--host", help="engine base URL; without it a simulated engine is started")
    p.add_argument("--profile", help="simulated engine profile (no --host)")
    p.add_argument(
        "--speedup",
        type=positive_float,
        default=1.0,
        help="simulated engine: model seconds per wall second (default 1)",
    )
    p.add_argument(
        "--duration",
        "-t",
        type=positive_duration,
        default=20.0,
        help="length of each trial, e.g. 20s (default 20s)",
    )
    p.add_argument("--seed", type=non_negative_int, help="workload seed")
    p.add_argument("--out", help="results folder (default results/<time>-<name>)")
    PRICE.add_to_cli(p)
    p.add_argument(
        "--gpus", type=positive_int, help="GPUs the deployment uses (default 1, or the profile's)"
    )


def run_command(scenario: Path, host: str, out: Path, load: Mapping[str, Any]) -> list[str]:
    """`slogate run` with ``load`` (users, rate, duration, seed) as its flags."""
    cmd = [sys.executable, "-m", "slogate.cli", "run", str(scenario), "--host", host]
    cmd += ["--out", str(out)]
    for key, value in load.items():
        if value is not None:
            cmd += [
                f"--{key.replace('_', '-')}",
                f"{value:g}" if isinstance(value, float) else str(value),
            ]
    return cmd


def log_path(out: Path) -> Path:
    """Where a trial's console output goes: beside its results folder."""
    return out.with_name(out.name + ".log")


def run_trial(scenario: Path, host: str, out: Path, **load: Any) -> TrialResult:
    """Run `slogate run` once; its console output goes to ``<out>.log``. No
    timeout here: the run ends itself at its duration, and killing it would
    orphan its Locust process (which runs in a session of its own)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with log_path(out).open("wb") as log:
        completed = subprocess.run(
            run_command(scenario, host, out, load),
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return finished_trial(out, completed.returncode)


def log_tail(result: TrialResult, lines: int = 15) -> str:
    """The end of a trial's console output, for an error message."""
    path = log_path(result.out)
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
