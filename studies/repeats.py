"""Repeats: N identical runs of one scenario judged as one (``slogate run --repeat N``).

Each run is a plain run with its own results folder, report and verdict
(``run-1/``, ``run-2/``, ...); this module reads only their summaries, so a
repeat set can be rebuilt from its folders. The combined verdict rests on
the spread of each SLO statistic across the runs
(:mod:`slogate.analysis.verdict.spread`), not on any one run: a run whose numbers
cannot be trusted (invalid, which an incomplete run is, or without a summary)
makes the set invalid, and an SLO a run could not bound (its own verdict
inconclusive) leaves that run's value out of the spread. Two repeat sets compare by their intervals:
a change inside the across-run spread is no regression.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from slogate.analysis.documents.contracts import (
    Repeats,
    ScenarioSummary,
    SpreadEntry,
    Summary,
    parse,
    read_document,
)
from slogate.analysis.documents.history import SUMMARY_FILE, repeat_set
from slogate.analysis.documents.versions import REPEATS_SCHEMA
from slogate.analysis.measurement.percentiles import STANDARD_PERCENTILES, Estimate
from slogate.analysis.verdict.compare import (
    DEFAULT_TOLERANCE,
    GATED,
    LATENCY_METRICS,
    Comparison,
    Delta,
    classify,
)
from slogate.analysis.verdict.slo import EXIT_CODES, Verdict, worst_of
from slogate.analysis.verdict.spread import spread, spread_verdict
from slogate.studies.trials import TrialResult

THROUGHPUTS = ("requests_per_s", "output_tokens_per_s")


def untrusted(result: TrialResult) -> str | None:
    """Why a run's numbers cannot enter the spread (None when they can)."""
    name = result.out.name
    if result.summary is None:
        return f"{name}: no summary (the run failed before measuring, exit {result.exit_code})"
    if result.summary.verdict == "invalid":
        reasons = "; ".join(result.summary.invalid_reasons) or "invalid"
        return f"{name}: invalid: {reasons}"
    return None


def blocks(results: Sequence[TrialResult], name: str) -> list[ScenarioSummary | None]:
    """The scenario's block in each run (None where a run lacks it)."""
    return [None if r.summary is None else r.summary.scenarios.get(name) for r in results]


def slo_spreads(per_run: Sequence[ScenarioSummary | None]) -> list[dict[str, Any]]:
    """Each SLO of the scenario (as the first run with the scenario declared
    them) with its value in every run, their spread and the verdict on the spread."""
    declared = next((b.slo for b in per_run if b is not None), [])
    entries = []
    for slo in declared:
        found = [
            None if b is None else next((e for e in b.slo if e.name == slo.name), None)
            for b in per_run
        ]
        values = [None if e is None or e.verdict == "inconclusive" else e.value for e in found]
        s = spread(values)
        entries.append(
            {
                "name": slo.name,
                "metric": slo.metric,
                "stat": slo.stat,
                "kind": slo.kind,
                "threshold": slo.threshold,
                **s.to_dict(),
                "run_verdicts": [None if e is None else e.verdict for e in found],
                "verdict": spread_verdict(s, slo.kind, slo.threshold).value,
            }
        )
    return entries


def metric_spreads(per_run: Sequence[ScenarioSummary | None]) -> dict[str, dict[str, Any]]:
    """Every latency percentile the runs measured, spread across the runs."""
    spreads: dict[str, dict[str, Any]] = {}
    for metric in (f"{m}_ms" for m in LATENCY_METRICS):
        dists = [None if b is None else b.metrics.get(metric) for b in per_run]
        if all(d is None or not d.count for d in dists):
            continue
        spreads[metric] = {
            stat: spread([None if d is None else getattr(d, stat) for d in dists]).to_dict()
            for stat in STANDARD_PERCENTILES
        }
    return spreads


def throughput_spreads(per_run: Sequence[ScenarioSummary | None]) -> dict[str, Any]:
    return {
        what: spread(
            [None if b is None else getattr(b.throughput, what) for b in per_run]
        ).to_dict()
        for what in THROUGHPUTS
    }


def scenario_spread(results: Sequence[TrialResult], name: str) -> dict[str, Any]:
    per_run = blocks(results, name)
    slos = slo_spreads(per_run)
    return {
        "verdict": worst_of(Verdict(e["verdict"]) for e in slos).value,
        "slo": slos,
        "metrics": metric_spreads(per_run),
        "throughput": throughput_spreads(per_run),
    }


def run_entry(result: TrialResult, out: Path, index: int) -> dict[str, Any]:
    s = result.summary
    return {
        "index": index,
        "dir": str(result.out.relative_to(out)),
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "started_at": None if s is None else s.run.started_at,
        "measured_s": None if s is None else s.run.measured_s,
        "report": None if s is None else str((result.out / "report.html").relative_to(out)),
    }


def build_document(
    results: Sequence[TrialResult],
    out: Path,
    asked: int,
    cooldown_s: float,
    command: str,
    stopped: str | None = None,
) -> dict[str, Any]:
    """The repeat set's summary.json: each run, each scenario's spreads and the
    combined verdict and exit code (docs/ci.md, "Repeats"); checked against
    its contract (:class:`Repeats`). ``stopped`` names the signal that
    stopped the set: invalid even when it came as the last run's load ended."""
    reasons = [why for why in map(untrusted, results) if why]
    if stopped:
        reasons.append(f"the set was interrupted ({stopped})")
    if len(results) < asked:
        reasons.append(f"{len(results)} of {asked} runs ran (the set was stopped)")
    names = list(dict.fromkeys(n for r in results if r.summary for n in r.summary.scenarios))
    scenarios = {name: scenario_spread(results, name) for name in names}
    if not names:
        reasons.append("no run measured any scenario")
    verdict = (
        Verdict.INVALID
        if reasons
        else worst_of(Verdict(block["verdict"]) for block in scenarios.values())
    )
    doc = {
        "schema": REPEATS_SCHEMA,
        "verdict": verdict.value,
        "exit_code": EXIT_CODES[verdict],
        "invalid_reasons": reasons,
        "created_at": datetime.now().isoformat(timespec="seconds"),
        "command": command,
        "repeat": asked,
        "cooldown_s": cooldown_s,
        "runs": [run_entry(r, out, i) for i, r in enumerate(results, 1)],
        "scenarios": scenarios,
        "baseline": None,
    }
    parse(Repeats, doc, str(out / "summary.json"))  # the writer holds to its own contract
    return doc


def compare_repeats(
    base: Repeats,
    new: Repeats,
    tolerance: float = DEFAULT_TOLERANCE,
    base_run: str | None = None,
    new_run: str | None = None,
) -> Comparison:
    """Two repeat sets, statistic by statistic, on the runs' spread: a change is a
    regression only beyond ``tolerance`` with the two Student-t intervals apart;
    inside them it is uncertain. Raises ValueError when they share no scenario."""
    shared = [name for name in new.scenarios if name in base.scenarios]
    if not shared:
        raise ValueError(
            f"no scenario in common: base has {list(base.scenarios) or 'none'}, "
            f"new has {list(new.scenarios) or 'none'}"
        )
    deltas = []
    for name in shared:
        b_block, n_block = base.scenarios[name], new.scenarios[name]
        for metric, stats in n_block.metrics.items():
            for stat, n_spread in stats.items():
                b_spread = b_block.metrics.get(metric, {}).get(stat)
                b, n = estimate_of(b_spread), estimate_of(n_spread)
                status = classify(b, n, tolerance)
                deltas.append(Delta(name, metric, stat, b, n, status, stat in GATED))
        for what, n_spread in n_block.throughput.items():
            b_spread = b_block.throughput.get(what)
            b, n = estimate_of(b_spread), estimate_of(n_spread)
            status = classify(b, n, tolerance, higher_is_worse=False)
            deltas.append(Delta(name, what, "run", b, n, status))
    return Comparison(
        base_run=base_run,
        new_run=new_run,
        tolerance=tolerance,
        gated=GATED,
        deltas=tuple(deltas),
        only_in_base=tuple(n for n in base.scenarios if n not in new.scenarios),
        only_in_new=tuple(n for n in new.scenarios if n not in base.scenarios),
    )


def with_baseline(doc: dict[str, Any], baseline: Repeats, base: str, new: str) -> dict[str, Any]:
    """The set's document with its comparison against an earlier set, and the
    exit code that follows: a set whose SLOs all pass exits 1 on a regression."""
    try:
        comparison = compare_repeats(baseline, parse(Repeats, doc, new), base_run=base, new_run=new)
    except ValueError as error:
        return {**doc, "baseline": {"error": str(error)}}
    code = doc["exit_code"] or comparison.exit_code
    return {**doc, "baseline": comparison.to_dict(), "exit_code": code}


def estimate_of(entry: SpreadEntry | None) -> Estimate | None:
    """A spread as an :class:`Estimate` (the mean and its interval), for the comparison rules."""
    if entry is None or entry.mean is None:
        return None
    return Estimate(entry.mean, entry.ci[0], entry.ci[1], entry.n)


def read_repeats(folder: Path) -> Repeats | None:
    """The repeat set in ``folder``; None when it holds none (a run's folder, or
    nothing). Raises ContractError when its summary.json is a broken set."""
    file = folder / SUMMARY_FILE
    return read_document(Repeats, file) if repeat_set(file) else None


def set_target(doc: Repeats, folder: Path) -> tuple[str, str] | None:
    """The engine's kind and model a set ran against, from its first run's
    summary (None when that run wrote none)."""
    first = folder / doc.runs[0].dir / SUMMARY_FILE if doc.runs else None
    if first is None or not first.is_file():
        return None
    engine = read_document(Summary, first).run.engine or {}
    return str(engine.get("owned_by") or ""), str(engine.get("model") or "")


def auto_repeat_baseline(
    root: Path, scenarios: Sequence[str], target: tuple[str, str], exclude: Path
) -> Path | None:
    """``--baseline auto`` with ``--repeat``: the newest earlier repeat set under
    ``root`` of the same scenarios against the same target (engine kind and
    model, as for a single run's), not invalid; None when there is none yet."""
    found = []
    for folder in root.iterdir() if root.is_dir() else ():
        if folder.resolve() == exclude.resolve():
            continue
        try:
            doc = read_repeats(folder)
            if doc is None or doc.verdict == "invalid":
                continue
            if sorted(doc.scenarios) == sorted(scenarios) and set_target(doc, folder) == target:
                found.append((doc.created_at, folder.name, folder))
        except (OSError, ValueError):
            continue  # a broken set is no baseline
    return max(found)[2] if found else None
