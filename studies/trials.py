"""A finished trial of a study, and how a point of a study lists and pools its trials.

Each trial is a plain `slogate run` writing its own results folder; a study
reads only those folders (summary.json, data/), so any trial can be opened,
re-rendered or compared like a run.

Starting the trial's process is :mod:`slogate.trial_process`'s, in the CLI:
this room declares no options and starts no processes, so what is here runs
the same on trials run now and on folders read back later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from slogate.analysis.documents.contracts import ScenarioSummary, Summary, read_document
from slogate.analysis.documents.rundata import RunData
from slogate.analysis.measurement.costs import Pricing, throughput_cost
from slogate.simengine.profiles import load_profile
from slogate.studies.points import point_block


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

    @property
    def saturated(self) -> bool:
        """Found past saturation (``--saturation``): its latencies describe a queue."""
        checked = None if self.summary is None else self.summary.run.saturation
        return checked is not None and checked.found is not None

    @property
    def beyond_limit(self) -> bool:
        """Failed, invalid or past saturation: a higher load can only be worse."""
        return self.verdict in ("fail", "invalid") or self.saturated


def finished_trial(out: Path, exit_code: int) -> TrialResult:
    """A trial that has ended: its folder's summary read back (None when it wrote none)."""
    summary_path = out / "summary.json"
    summary = read_document(Summary, summary_path) if summary_path.is_file() else None
    return TrialResult(out, exit_code, summary)


def write_scenario(path: Path, raw: Mapping[str, Any]) -> Path:
    """A trial's scenario as YAML beside the study, so the trial can be rerun alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(dict(raw), sort_keys=False), encoding="utf-8")
    return path


def run_entry(result: TrialResult, base: Path, repeat: int | None = None) -> dict[str, Any]:
    """How a point lists one of its runs: folder (relative), verdict, exit code and
    the run's scenario block (the first scenario's, for the per-run CSV)."""
    block = result.first_scenario
    return {
        "dir": str(result.out.relative_to(base)),
        "repeat": repeat,
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "scenario": None if block is None else block.model_dump(by_alias=True, exclude_unset=True),
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


def trial_pricing(
    price_per_hour: float | None, gpus: int | None, host: str | None, profile: str | None
) -> Pricing | None:
    """The study's pricing; on the simulated engine the GPU count defaults to the
    profile's tensor parallelism (the GPUs that profile's deployment rents)."""
    if gpus is None and price_per_hour is not None and not host and profile:
        gpus = load_profile(profile).tp
    return Pricing.from_options(price_per_hour, gpus)
