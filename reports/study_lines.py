"""What a study prints: a line per trial (or selftest step) as it ends, and the findings last.

Plain text for a terminal or CI log, rendered from the trial's summary and the
study's document; nothing is decided here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slogate.analysis.contracts import ScenarioSummary

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
    ttft, tpot = block.metrics["ttft_ms"], block.metrics["tpot_ms"]
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


def tune_closing_lines(doc: Mapping[str, Any], files: Mapping[str, Path]) -> list[str]:
    """The headline, each treatment's capacity or why it has none, the
    recommendation's launch command, the engine time and the files written."""
    lines = [f"slogate: {doc['headline']}"]
    unit = doc["target"]["unit"]
    for t in doc["treatments"]:
        capacity = (t.get("capacity") or {}).get("value")
        if t["status"] == "measured":
            found = "no load met every SLO" if capacity is None else f"{capacity:g} {unit}"
            versus = f", {t['vs_current']} than current" if t.get("vs_current") else ""
            text = found + versus
        elif t["status"] == "pruned":
            text = f"pruned: {t['pruned_reason']}"
        elif t["status"] == "failed":
            text = f"failed: {t['error']}"
        else:
            text = "not run"
        lines.append(f"slogate:   {t['name']}{' (current)' if t['current'] else ''}: {text}")
    best = doc["recommended"]
    if best is not None:
        lines.append(f"slogate: recommended: {best['command_line']}")
    grid = doc["full_grid_engine_time_s"]
    spent = f"slogate: engine time {doc['engine_time_s']:.0f} s"
    lines.append(spent + (f" (a full grid: about {grid:.0f} s)" if grid else ""))
    lines += [f"slogate: {name} {path}" for name, path in files.items()]
    return lines
