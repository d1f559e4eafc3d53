"""What a study prints: a line per trial (or selftest step) as it ends, and the findings last.

Plain text for a terminal or CI log, rendered from the trial's summary and the
study's document; nothing is decided here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slogate.analysis.documents.contracts import (
    ScenarioSummary,
    Tune,
    TuneCapacity,
    TuneRunnerUp,
    TuneTreatment,
    as_model,
)
from slogate.analysis.documents.neutral import neutral_text
from slogate.scenarios.metrics import TPOT, TTFT

if TYPE_CHECKING:
    from slogate.studies.generator_capacity import CapacityResult, Step


def sweep_trial_line(
    index: int, value: float, unit: str, confirmation: bool, verdict: str, limiting: str | None
) -> str:
    """``[3] trial at 8 requests/s: fail (chat: ttft_ms p90 <= 150 ...)``; the
    limiting SLO only when the trial did not pass."""
    kind = "confirmation" if confirmation else "trial"
    why = f" ({limiting})" if limiting and verdict != "pass" else ""
    return f"[{index}] {kind} at {value:g} {unit}: {verdict}{why}"


def sweep_closing_lines(doc: Mapping[str, Any], report: Path) -> list[str]:
    """The headline, the findings, the cost at the max and the report's path."""
    lines = [f"slogate: {doc['headline']}"]
    lines += [f"slogate: {line}" for line in doc["findings"]]
    cost = doc["cost_at_max"]
    if cost:
        lines.append(
            f"slogate: cost at the max: {cost['per_million_output_tokens']:.4g} per million "
            f"output tokens, {cost['per_million_input_tokens']:.4g} per million input tokens"
        )
    lines.append(f"slogate: report {report}")
    return lines


def experiment_trial_line(
    factor: str,
    label: str,
    repeat: int,
    verdict: str,
    block: ScenarioSummary | None,
    exit_code: int,
    out: Path,
) -> str:
    """One trial's verdict and headline numbers (TTFT, TPOT, output tokens/s)."""
    if block is None:
        return f"{factor} {label} (repeat {repeat}): no results (exit {exit_code})"
    ttft, tpot = block.metrics[TTFT.key], block.metrics[TPOT.key]
    return (
        f"{factor} {label} (repeat {repeat}): {verdict}, "
        f"TTFT mean {ttft.mean or 0:.1f} ms p99 {ttft.p99 or 0:.1f} ms, "
        f"TPOT mean {tpot.mean or 0:.2f} ms, "
        f"{block.throughput.output_tokens_per_s or 0:.0f} output tokens/s -> {out}"
    )


def experiment_closing_lines(doc: Mapping[str, Any], report: Path) -> list[str]:
    """Each trend as read, then the report's path."""
    return [f"slogate: {t['text']}" for t in doc["trends"]] + [f"slogate: report {report}"]


def capacity_step_line(step: Step) -> str:
    """One selftest step as it ends."""
    return (
        f"slogate capacity: {step.streams} streams: {step.events_per_s:,.0f} events/s, "
        f"max error {step.max_abs_error_ms:.3f} ms, {step.client_cores:.2f} cores"
    )


def capacity_text(result: CapacityResult, start: int, most: int) -> str:
    """What one worker process holds here, why the search stopped, and the workers
    a scenario needs."""
    best, bound = result.best, result.bound_ms
    if best is None:
        return f"not even {start} streams stay within {bound:g} ms here"
    text = (
        f"one worker process holds {best.events_per_s:,.0f} output events/s within "
        f"{bound:g} ms here ({best.streams} streams, {best.client_cores:.2f} cores)"
    )
    if result.stopped_at_most:
        text += f"; the search stopped at --max-streams {most}, not at the bound"
    sizing = result.sizing
    if sizing is not None:
        text += (
            f"\n{sizing.scenario}: up to {sizing.planned_events_per_s:,.0f} output events/s "
            f"planned -> {sizing.workers} worker(s)"
        )
    return text


def settings_text(settings: Mapping[str, str]) -> str:
    """``max_num_seqs=16 enable_chunked_prefill=true``, as ``--set`` names them."""
    return " ".join(f"{name}={value}" for name, value in settings.items()) or "(no settings)"


def spelled(t: TuneTreatment) -> bool:
    """Whether a treatment's name is its settings (``max_num_seqs=4,tp=2``), so
    that what shows it need not repeat them."""
    return t.name in (
        ",".join(f"{k}={v}" for k, v in t.settings.items()),
        settings_text(t.settings),
    )


def treatment_label(t: TuneTreatment) -> str:
    """The name, with the settings after it unless the name spells them."""
    return t.name if spelled(t) else f"{t.name} {settings_text(t.settings)}"


def bound_text(value: float | None, missing: str) -> str:
    return missing if value is None else f"{value:g}"


def tune_capacity_text(capacity: TuneCapacity | None) -> str:
    """``12 requests/s [12, 13]``: the capacity and its interval [highest pass,
    lowest fail]; an upper bound is open when no load failed."""
    if capacity is None or capacity.value is None:
        return "no load met every SLO"
    lower = bound_text(capacity.lower, "none")
    upper = bound_text(capacity.upper, "open")
    return f"{capacity.value:g} {capacity.unit} [{lower}, {upper}]"


def duration(seconds: float) -> str:
    """Engine time as a person reads it: 45 s, 12.5 min, 2.1 h."""
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def by_rank(treatments: Iterable[TuneTreatment]) -> list[TuneTreatment]:
    """Ranked treatments first, best first; the unranked after them in the tune's order."""
    return sorted(treatments, key=lambda t: (t.rank is None, t.rank or 0))


def names(treatments: Iterable[TuneTreatment]) -> str:
    """Names joined; a pruned one is marked, as only its screening bracket was compared."""
    return ", ".join(
        f"{t.name} (screening only)" if t.status == "pruned" else t.name for t in treatments
    )


def tune_verdict_lines(doc: Tune) -> list[str]:
    """Which treatments beat the current settings by more than the capacity
    intervals, which differ by no more than the noise, which are worse."""
    current = next((t for t in doc.treatments if t.current), None)
    if current is None or current.status != "measured":
        return [f"the current settings ({doc.current.treatment}) were not measured: no comparison"]
    others = by_rank(t for t in doc.treatments if not t.current)
    better = [t for t in others if t.vs_current == "better"]
    noise = [t for t in others if t.vs_current == "noise"]
    worse = [t for t in others if t.vs_current == "worse"]
    lines = [
        f"better than the current settings ({current.name}) by more than their intervals: "
        f"{names(better)}"
        if better
        else f"no treatment beats the current settings ({current.name}) by more than the intervals"
    ]
    if noise:
        lines.append(
            f"within the noise of the current settings (intervals overlap): {names(noise)}"
        )
    if worse:
        lines.append(
            f"worse than the current settings by more than their intervals: {names(worse)}"
        )
    return lines


def tune_spending_lines(doc: Tune) -> list[str]:
    """What screening pruned and why, what failed or was not reached, and the
    engine time spent against a full grid's."""
    total = len(doc.treatments)
    lines = []
    pruned = [t for t in doc.treatments if t.status == "pruned"]
    if pruned:
        why = "; ".join(f"{t.name} ({t.pruned_reason or 'below the best'})" for t in pruned)
        lines.append(f"screening pruned {len(pruned)} of {total} treatments: {why}")
    lines += [
        f"{t.name} failed: {t.error or 'no reason recorded'}"
        for t in doc.treatments
        if t.status == "failed"
    ]
    pending = [t for t in doc.treatments if t.status == "pending"]
    if pending:
        lines.append(f"not reached ({len(pending)} of {total}; --resume goes on): {names(pending)}")
    spent = f"engine time {duration(doc.engine_time_s)}"
    full = doc.full_grid_engine_time_s
    if full:
        spent += f", {doc.engine_time_s / full:.0%} of the {duration(full)} a full grid takes"
    return [*lines, spent]


def treatment_line(t: TuneTreatment) -> str:
    """``2. C max_num_seqs=16: 9 requests/s [9, 10], better than the current settings``."""
    versus = {
        "better": ", better than the current settings",
        "worse": ", worse than the current settings",
        "noise": ", within the noise of the current settings",
    }
    head = f"{t.rank}. " if t.rank is not None else ""
    mark = " (current)" if t.current else ""
    found = tune_capacity_text(t.capacity) + versus.get(t.vs_current or "", "")
    return f"  {head}{treatment_label(t)}{mark}: {found}"


def runner_up_text(runner_up: TuneRunnerUp | None) -> str:
    """``, better than the runner-up X`` or ``, within the noise of the runner-up X``."""
    if runner_up is None:
        return ""
    if runner_up.comparison == "better":
        return f", better than the runner-up {runner_up.treatment} by more than the intervals"
    return f", within the noise of the runner-up {runner_up.treatment} (either will do)"


def tune_closing_lines(doc: Tune | Mapping[str, Any], files: Mapping[str, Path]) -> list[str]:
    """The headline, the measured treatments best first, the recommendation and
    how to launch it, the verdict against the current settings, what was
    pruned, failed or spent, and the files written; neutralised, as a failed
    engine's error is its own text."""
    tune = as_model(Tune, doc, "tune.json")
    lines = [tune.headline]
    lines += [treatment_line(t) for t in by_rank(tune.treatments) if t.status == "measured"]
    rec = tune.recommended
    if rec is not None:
        chosen = next((t for t in tune.treatments if t.name == rec.treatment), None)
        label = rec.treatment if chosen is None else treatment_label(chosen)
        capacity = tune_capacity_text(None if chosen is None else chosen.capacity)
        lines += [
            f"recommended {label} (capacity {capacity}){runner_up_text(rec.runner_up)}",
            f"launch with: {rec.command_line}",
        ]
    lines += [*tune_verdict_lines(tune), *tune_spending_lines(tune)]
    lines += [f"{name} {path}" for name, path in files.items()]
    return [f"slogate: {neutral_text(line)}" for line in lines]
