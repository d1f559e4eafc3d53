"""One trial of an experiment or sweep: a plain `slogate run` at one setting.

Each trial is its own `slogate run` process writing its own results folder
(summary, report, data), so any trial can be opened, re-rendered or compared
like a run; the experiment or sweep only reads those folders. The engine
(:mod:`slogate.target`) is the one the user names (``--host``) or a
simulated engine started for the trials that share a profile.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slogate.analysis.capacity import Pricing, throughput_cost
from slogate.analysis.contracts import ScenarioSummary, Summary, read_document
from slogate.analysis.experiment import point_block
from slogate.analysis.rundata import RunData
from slogate.locustfiles.argtypes import positive_duration, positive_float, positive_int
from slogate.locustfiles.options import PRICE
from slogate.simengine.profiles import load_profile


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
    p.add_argument("--seed", type=int, help="workload seed")
    p.add_argument("--out", help="results folder (default results/<time>-<name>)")
    PRICE.add_to_cli(p)
    p.add_argument(
        "--gpus", type=positive_int, help="GPUs the deployment uses (default 1, or the profile's)"
    )


def pricing_of(args: argparse.Namespace) -> Pricing | None:
    """The price flags; on the simulated engine the GPU count defaults to the
    profile's tensor parallelism."""
    gpus = args.gpus
    if gpus is None and args.gpu_price_per_hour is not None and not args.host and args.profile:
        gpus = load_profile(args.profile).tp
    return Pricing.from_options(args.gpu_price_per_hour, gpus)


@dataclass(frozen=True)
class TrialResult:
    """A finished trial: its folder, `slogate run`'s exit code and summary (None
    when the run wrote none: it failed before measuring)."""

    out: Path
    exit_code: int
    summary: Summary | None

    @property
    def verdict(self) -> str:
        return "error" if self.summary is None else self.summary.verdict

    @property
    def first_scenario(self) -> ScenarioSummary | None:
        """The first scenario's block: a trial runs one scenario."""
        scenarios = {} if self.summary is None else self.summary.scenarios
        return next(iter(scenarios.values()), None)

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"


def write_scenario(path: Path, raw: Mapping[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(raw), sort_keys=False), encoding="utf-8")
    return path


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
    summary_path = out / "summary.json"
    summary = read_document(Summary, summary_path) if summary_path.is_file() else None
    return TrialResult(out, completed.returncode, summary)


def log_tail(result: TrialResult, lines: int = 15) -> str:
    """The end of a trial's console output, for an error message."""
    path = log_path(result.out)
    if not path.is_file():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def run_entry(result: TrialResult, base: Path, repeat: int | None = None) -> dict[str, Any]:
    """How a point lists one of its runs: folder (relative), verdict, exit code and
    the run's scenario block (the first scenario's, for the per-run CSV)."""
    block = result.first_scenario
    return {
        "dir": str(result.out.relative_to(base)),
        "repeat": repeat,
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "scenario": None if block is None else block.model_dump(by_alias=True),
    }


def point_of(
    label: str,
    x: float,
    results: list[TrialResult],
    base: Path,
    pricing: Pricing | None,
) -> dict[str, Any]:
    """A point: its trials' data pooled, each trial listed, and its cost."""
    runs = [RunData.load(r.out) for r in results if (r.out / "data" / "run.json").is_file()]
    block = point_block(runs)
    return {
        "label": label,
        "x": x,
        "runs": [run_entry(r, base, i + 1) for i, r in enumerate(results)],
        **block,
        "cost": throughput_cost(pricing, block["throughput"]),
    }
