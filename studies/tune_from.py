"""From a failed run's diagnosis to a tune's treatments (``slogate tune --from RUN_DIR``).

A diagnosis names the engine settings that address each cause it found and
which way to move them (``analysis.diagnosis.remedies``); whether moving one actually
brings the SLO back is a question only a measurement answers. So the treatments
are built around the settings the run used: each setting a finding that
explains a missed SLO names gets its current level plus steps the remedy's way
(doubling up, halving down, or the other state of a switch), and the tune then
says which remedy moved the SLO and by how much.

The remedies are read from summary.json's ``diagnosis`` (each finding's
``remedies``); a summary written before they were kept has only the prose, and
its findings' causes give the same remedies (``analysis.diagnosis.remedies.remedies``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slogate.analysis.diagnosis.remedies import DOWN, LLAMACPP, ON, UP, VLLM, remedies

SUMMARY = "summary.json"
# The engine family whose setting names each kind of tuned engine takes: the
# simulated engine models vLLM's scheduler and is tuned by vLLM's names.
FAMILY = {"llamacpp": LLAMACPP, "vllm": VLLM, "simulated": VLLM}
FAILED = ("fail", "invalid", "inconclusive")
DEFAULT_STEPS = 2
TRUE_WORDS = frozenset({"true", "on", "1", "yes"})


@dataclass(frozen=True)
class RunRemedy:
    """A setting a finding of the run names: its cause, the failed SLOs it
    explains, and which way to move the setting."""

    cause: str
    explains: tuple[str, ...]
    setting: str
    direction: str


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The run's summary.json, or ValueError saying why it cannot be used."""
    path = run_dir / SUMMARY
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"{run_dir}: no {SUMMARY}; --from takes a run's output folder") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not readable JSON ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("diagnosis"), list):
        raise ValueError(f"{path}: no diagnosis in it (a slogate run's summary has one)")
    return document


def run_remedies(run_dir: Path, engine_kind: str) -> list[RunRemedy]:
    """The settings, by the tune's names for ``engine_kind``, that the findings
    explaining the run's missed SLOs name, in the diagnosis's order (the cause
    explaining most first). ValueError when the run passed or ``engine_kind``
    is not one whose settings a diagnosis names."""
    family = FAMILY.get(engine_kind)
    if family is None:
        raise ValueError(
            f"--from needs an engine whose settings a diagnosis names ({', '.join(FAMILY)}), "
            f"not {engine_kind!r}"
        )
    summary = read_summary(run_dir)
    if summary.get("verdict") not in FAILED:
        raise ValueError(
            f"{run_dir}: the run's verdict is {summary.get('verdict')!r}: no missed SLO to fix"
        )
    found = []
    for finding in summary["diagnosis"]:
        if not isinstance(finding, dict) or not finding.get("explains"):
            continue
        for setting, direction in finding_remedies(finding, family):
            found.append(
                RunRemedy(
                    str(finding.get("cause")),
                    tuple(str(e) for e in finding["explains"]),
                    setting,
                    direction,
                )
            )
    return found


def finding_remedies(finding: Mapping[str, Any], family: str) -> list[tuple[str, str]]:
    """(setting, direction) of the finding for the engine family: as written
    where the run diagnosed that family, else from its cause."""
    written = [
        (str(r["setting"]), str(r["direction"]))
        for r in finding.get("remedies") or ()
        if isinstance(r, dict) and r.get("engine") == family
    ]
    if written:
        return written
    return [(r.setting, r.direction) for r in remedies(str(finding.get("cause")), family)]


def levels(current: str, directions: set[str], steps: int) -> list[str]:
    """The current level and ``steps`` steps each way the remedies point:
    numbers double up and halve down (never below 1), a switch takes its
    other state; numbers in ascending order, a switch's current state first."""
    if ON in directions:
        state = current.strip().lower() in TRUE_WORDS
        return [str(state).lower(), str(not state).lower()]
    try:
        value = int(current)
    except ValueError:
        raise ValueError(f"current level {current!r} is not a whole number") from None
    found = {value}
    for i in range(1, steps + 1):
        if UP in directions:
            found.add(value * 2**i)
        if DOWN in directions:
            found.add(max(1, value // 2**i))
    return [str(v) for v in sorted(found)]


def treatments_from_run(
    run_dir: Path,
    engine_kind: str,
    current: Mapping[str, str],
    *,
    steps: int = DEFAULT_STEPS,
) -> dict[str, list[str]]:
    """Factors and their levels for a tune of ``engine_kind`` around the
    settings ``current`` holds (the engine's settings in the failed run), one
    factor for each setting the run's diagnosis names; a setting that two causes
    move opposite ways gets steps both ways. ValueError when the run passed,
    names no setting of this engine, or ``current`` lacks a setting it names."""
    directions: dict[str, set[str]] = {}
    for remedy in run_remedies(run_dir, engine_kind):
        directions.setdefault(remedy.setting, set()).add(remedy.direction)
    if not directions:
        raise ValueError(
            f"{run_dir}: no finding that explains a missed SLO names a setting of "
            f"{engine_kind} a tune can vary; read its report's diagnosis for what else to try"
        )
    factors = {}
    for setting, ways in directions.items():
        if setting not in current:
            raise ValueError(
                f"the diagnosis names {setting}, but the current settings "
                f"({', '.join(current) or 'none'}) do not say its level"
            )
        try:
            factors[setting] = levels(current[setting], ways, steps)
        except ValueError as error:
            raise ValueError(f"setting {setting}: {error}") from None
    return factors


def remedies_linked(
    run_dir: Path, engine_kind: str, factors: Mapping[str, Sequence[str]]
) -> tuple[tuple[str, ...], ...]:
    """The settings one finding moves together, as the tune's linked groups:
    a remedy such as llama.cpp's "more --parallel slots, with --ctx-size
    raised to keep each slot's context" is one change to measure, not two
    factors to cross (a slot count raised without the context halves each
    slot's). A setting stays in the first group that names it, and a group
    links only settings with as many levels as each other."""
    by_cause: dict[str, list[str]] = {}
    for remedy in run_remedies(run_dir, engine_kind):
        names = by_cause.setdefault(remedy.cause, [])
        if remedy.setting in factors and remedy.setting not in names:
            names.append(remedy.setting)
    groups: list[tuple[str, ...]] = []
    taken: set[str] = set()
    for names in by_cause.values():
        group = tuple(n for n in names if n not in taken)
        if len(group) > 1 and len({len(factors[n]) for n in group}) == 1:
            groups.append(group)
            taken.update(group)
    return tuple(groups)
