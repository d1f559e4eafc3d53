"""Tunes: an engine restarted per treatment of its settings, each treatment's
capacity under the scenario's SLOs, and the settings to recommend.

Two passes keep the engine time below a full grid's. Screening: each treatment
gets a short max-load search (short trials, a coarse tolerance, no
confirmation) whose bracket [highest pass, lowest fail] bounds its capacity;
it starts at the most load any treatment has held so far, and ends at once
when it fails there. Then, best screening bracket first, each treatment gets
the full search (:func:`slogate.studies.sweep.run_sweep`, confirmed), started
from its bracket, unless it failed at a load another treatment held: it cannot
be the best, and the document says so (successive halving with one rung).
Per engine start: start, warm up, reset its caches, measure, stop.

Every phase of a treatment ends in a record written atomically to its folder
(``screening.json``, ``treatment.json``), so a tune killed at any point
resumes from them: a finished phase is never rerun, an unfinished one is
rerun from its start. The engine and the trials come in as objects and
callables from the CLI; nothing here parses flags, speaks HTTP or draws.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from slogate.analysis.documents.contracts import Tune, parse, read_document
from slogate.analysis.documents.rundata import write_json_atomic
from slogate.analysis.documents.versions import TUNE_SCHEMA
from slogate.engines.tunable import (
    CacheResetFailed,
    EngineStartFailed,
    EngineUnderTune,
    RunningTreatment,
)
from slogate.scenarios.metrics import E2E
from slogate.studies.max_load import MaxSearch
from slogate.studies.sweep import (
    Mode,
    SweepRun,
    SweepSettings,
    SweepTrials,
    TrialRunner,
    run_sweep,
)
from slogate.studies.sweep import build_document as sweep_document
from slogate.studies.trials import TrialResult
from slogate.studies.tune_factors import FactorSpace, Treatment
from slogate.studies.tune_verdict import (
    against_runner_up,
    best_lower,
    compared,
    meets,
    pareto_front,
    prune_reason,
    ranked,
    recommended,
)

RunnerFor = Callable[[str, Path], TrialRunner]  # engine URL, trials' folder -> runner
Say = Callable[[str], None]
SCREENING, RECORD = "screening.json", "treatment.json"


@dataclass(frozen=True)
class TuneSettings:
    """What a tune was asked: the load kind and target, each search's trial
    length and tolerance, whether to screen and prune, the warm-up's length."""

    scenario: str
    mode: Mode
    unit: str
    target: float
    duration: float
    screen_duration: float
    tolerance: float = 0.1
    screen_tolerance: float = 0.5
    prune: bool = True
    warmup: float = 2.0
    max_trials: int = 16
    seed: int | None = None
    command: str = ""

    def check(self) -> None:
        """ValueError naming a tolerance or target the searches would refuse,
        before any engine starts."""
        for flag, tolerance in (
            ("--tolerance", self.tolerance),
            ("--screen-tolerance", self.screen_tolerance),
        ):
            try:
                self.sweep(self.duration, tolerance).search()
            except ValueError as error:
                raise ValueError(f"{flag}: {error}") from None

    def sweep(self, duration: float, tolerance: float) -> SweepSettings:
        return SweepSettings(
            scenario=self.scenario,
            mode=self.mode,
            duration=duration,
            find_max=True,
            start=self.target,
            tolerance=tolerance,
            max_trials=self.max_trials,
            seed=self.seed,
            command=self.command,
        )


@dataclass(frozen=True)
class TuneParts:
    """What the CLI hands a tune: the engine, a trial runner per engine URL and
    folder, the GPUs a treatment uses (for throughput per GPU), and where its
    progress lines go."""

    engine: EngineUnderTune
    runner_for: RunnerFor
    gpus: Callable[[Mapping[str, str]], int]
    say: Say


class EngineCrashed(RuntimeError):
    """The engine stopped serving during a treatment's measurements, or refused
    its cache reset."""


@dataclass
class TreatmentRun:
    """One treatment's place on disk and the records it has so far."""

    index: int
    treatment: Treatment
    folder: Path

    @property
    def name(self) -> str:
        return self.treatment.name

    def read(self, file: str) -> dict[str, Any] | None:
        path = self.folder / file
        if not path.is_file():
            return None
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def write(self, file: str, record: Mapping[str, Any]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.folder / file, dict(record))

    def fresh(self, phase: str) -> Path:
        """A phase's folder, emptied of what a killed earlier attempt left."""
        path = self.folder / phase
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
        return path

    def base(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "settings": dict(self.treatment.settings),
            "current": self.treatment.current,
        }


def engine_session(
    parts: TuneParts,
    run: TreatmentRun,
    phase: str,
    warmup: Callable[[str, Path], None],
    measure: Callable[[RunnerFor, str, Path], dict[str, Any]],
) -> dict[str, Any]:
    """Start the engine with the treatment's settings, warm it up, reset its
    caches, measure, stop it: the record of the phase with the engine's figures,
    or a failed record with its log's tail when it did not start or crashed."""
    folder = run.fresh(phase)
    began = time.monotonic()
    figures: dict[str, Any] = {"startup_s": None, "peak_memory_bytes": None}
    try:
        running = parts.engine.start(run.treatment.settings, folder)
    except EngineStartFailed as error:
        return {
            "status": "failed",
            "error": f"{phase}: engine did not start: {str(error).splitlines()[0]}",
            "log_tail": error.log_tail,
            "engine_time_s": time.monotonic() - began,
            **figures,
        }
    figures["startup_s"] = running.startup_s
    try:
        warmup(running.url, folder / "warmup")
        try:
            running.reset_caches()
        except (CacheResetFailed, OSError) as error:
            raise EngineCrashed(f"cache reset failed: {error}") from None
        record = measure(watched(parts.runner_for, running), running.url, folder)
        record["status"] = "measured"
    except EngineCrashed as error:
        record = {"status": "failed", "error": f"{phase}: {error}", "log_tail": running.log_tail()}
    finally:
        figures["peak_memory_bytes"] = running.peak_memory_bytes()
        tail = running.log_tail()
        running.stop()
    record.setdefault("log_tail", tail)
    return {**record, **figures, "engine_time_s": time.monotonic() - began}


def watched(runner_for: RunnerFor, running: RunningTreatment) -> RunnerFor:
    """Trial runners that stop the treatment once its engine died: a trial
    against a dead engine would only fail and read as the SLO failing."""

    def runner(url: str, folder: Path) -> TrialRunner:
        inner = runner_for(url, folder)

        def run(spec: Any) -> TrialResult:
            if not running.alive():
                raise EngineCrashed("engine exited during the measurements")
            result = inner(spec)
            if not running.alive():
                raise EngineCrashed(f"engine exited during trial {spec.name}")
            return result

        return run

    return runner


def screening_search(
    settings: TuneSettings, runner: TrialRunner, held: float | None
) -> tuple[float | None, float | None]:
    """A coarse max-load search without its confirmation: its bracket. It
    starts at ``held``, the most load another treatment has held (else the
    target): a treatment that fails there is out of the race after one trial."""
    sweep = settings.sweep(settings.screen_duration, settings.screen_tolerance)
    search = MaxSearch(
        start=held or settings.target, integer=settings.mode == "users", tolerance=sweep.tolerance
    )
    trials = SweepTrials(sweep, runner)
    for _ in range(sweep.max_trials):
        step = search.next()
        if step is None or step.confirmation:
            break
        search.record(step.value, trials.judge(step.value, sweep.duration).passed)
        if held is not None and search.lowest_fail is not None and search.lowest_fail <= held:
            break
    return search.highest_pass, search.lowest_fail


def full_search(
    settings: TuneSettings, bracket: Mapping[str, Any] | None, runner: TrialRunner, out: Path
) -> tuple[SweepRun, dict[str, Any]]:
    """The confirmed max-load search, started at the screening bracket's lower
    bound and growing straight to its upper one, so two trials re-establish it."""
    sweep = settings.sweep(settings.duration, settings.tolerance)
    lower = None if bracket is None else bracket.get("lower")
    upper = None if bracket is None else bracket.get("upper")
    start = lower or (upper / 2 if upper else None) or settings.target
    growth = upper / lower if lower and upper and upper > lower else 2.0
    search = MaxSearch(
        start=start, integer=settings.mode == "users", tolerance=sweep.tolerance, growth=growth
    )
    run = run_sweep(sweep, search, runner)
    doc = sweep_document(run, out, None)
    write_json_atomic(out / "sweep.json", doc)
    return run, doc


def at_capacity(
    run: SweepRun, doc: Mapping[str, Any], settings: TuneSettings, gpus: int, base: Path
) -> dict[str, Any]:
    """The capacity block, the throughput at it (its confirmation trial's) and
    the confirmation's report, relative to the tune's folder."""
    search = run.search
    limiting = doc.get("limiting_slo") or {}
    capacity = {
        "value": search.result,
        "lower": search.highest_pass,
        "upper": search.lowest_fail,
        "unit": settings.unit,
        "confirmed": search.confirmed,
        "limiting_slo": limiting.get("name"),
    }
    confirmations = [
        r
        for value, confirm, r in run.trials.order
        if confirm and r.passed and value == search.result
    ]
    confirmation = confirmations[-1] if confirmations else None
    if confirmation is None:
        return {"capacity": capacity, "throughput": None, "report": None}
    block = confirmation.first_scenario
    output = None if block is None else block.throughput.output_tokens_per_s
    concurrency = search.result if settings.mode == "users" else rate_concurrency(run, confirmation)
    throughput = {
        "output_tokens_per_s": output,
        "per_gpu": None if output is None else output / gpus,
        "per_user": None if output is None or not concurrency else output / concurrency,
    }
    report = confirmation.out / "report.html"
    return {
        "capacity": capacity,
        "throughput": throughput,
        "report": str(report.relative_to(base)) if report.is_file() else None,
    }


def rate_concurrency(run: SweepRun, confirmation: TrialResult) -> float | None:
    """Requests in flight on average at an open-loop rate (Little's law: rate x
    mean end-to-end latency): the users a rate serves."""
    block = confirmation.first_scenario
    e2e = None if block is None else block.metrics.get(E2E.key)
    if e2e is None or e2e.mean is None or run.search.result is None:
        return None
    return run.search.result * e2e.mean / 1000


class Tuner:
    """Runs the treatments of one tune into ``out``, resuming from what is there."""

    def __init__(
        self,
        settings: TuneSettings,
        parts: TuneParts,
        warmup: Callable[[str, Path], None],
        out: Path,
        treatments: list[Treatment],
        written: Callable[[], None] = lambda: None,
    ) -> None:
        """``warmup(url, folder)`` loads a fresh engine before its caches are
        reset; ``written`` is called after each record, to rewrite tune.json."""
        self.settings, self.parts, self.warmup, self.out = settings, parts, warmup, out
        self.written = written
        self.runs = [
            TreatmentRun(i + 1, t, out / "treatments" / t.folder(i + 1))
            for i, t in enumerate(treatments)
        ]

    def records(self) -> list[dict[str, Any]]:
        """Every treatment's latest record: final, screened, or pending."""
        result = []
        for run in self.runs:
            record = run.read(RECORD) or run.read(SCREENING)
            result.append(record or {**run.base(), "status": "pending", "engine_time_s": 0.0})
        return result

    def run(self) -> None:
        if self.settings.prune:
            for run in self.runs:
                if run.read(RECORD) is None and run.read(SCREENING) is None:
                    self.screen(run)
        for run in self.search_order():
            if run.read(RECORD) is None:
                self.measure(run)

    def screen(self, run: TreatmentRun) -> None:
        settings = self.settings
        self.parts.say(f"screening {run.name}")

        best = best_lower(self.records())
        held = None if best is None else best[0]

        def measure(runner_for: RunnerFor, url: str, folder: Path) -> dict[str, Any]:
            lower, upper = screening_search(settings, runner_for(url, folder), held)
            return {"screening": {"lower": lower, "upper": upper}}

        record = {**run.base(), **engine_session(self.parts, run, "screen", self.warmup, measure)}
        if record["status"] == "failed":
            run.write(RECORD, record)
        else:
            record["status"] = "pending"
            run.write(SCREENING, record)
        self.written()

    def search_order(self) -> list[TreatmentRun]:
        """Best screening bracket first, so the bound that prunes rises early."""

        def key(run: TreatmentRun) -> tuple[float, float]:
            screening = (run.read(SCREENING) or {}).get("screening") or {}
            upper, lower = screening.get("upper"), screening.get("lower")
            return (-(upper if upper is not None else float("inf")), -(lower or 0.0))

        return sorted(self.runs, key=key)

    def measure(self, run: TreatmentRun) -> None:
        settings, parts = self.settings, self.parts
        screened = run.read(SCREENING) or run.base()
        reason = prune_reason(screened, self.records(), settings.unit) if settings.prune else None
        if reason is not None:
            parts.say(f"pruned {run.name}: {reason}")
            run.write(RECORD, {**screened, "status": "pruned", "pruned_reason": reason})
            self.written()
            return
        parts.say(f"full search {run.name}")
        gpus = parts.gpus(run.treatment.settings)

        def measure(runner_for: RunnerFor, url: str, folder: Path) -> dict[str, Any]:
            bracket = screened.get("screening")
            sweep_run, doc = full_search(settings, bracket, runner_for(url, folder), folder)
            found = at_capacity(sweep_run, doc, settings, gpus, self.out)
            sweep = str(folder.relative_to(self.out))
            return {**found, "sweep": sweep, "full_trials": len(sweep_run.trials.order)}

        session = engine_session(parts, run, "full", self.warmup, measure)
        spent = float(screened.get("engine_time_s") or 0.0)
        record = {
            **screened,
            **session,
            "engine_time_s": spent + session["engine_time_s"],
            "full_search_s": session["engine_time_s"],
            "startup_s": session["startup_s"] or screened.get("startup_s"),
            "peak_memory_bytes": max(
                session["peak_memory_bytes"] or 0, screened.get("peak_memory_bytes") or 0
            )
            or None,
        }
        run.write(RECORD, record)
        self.written()
        capacity = (record.get("capacity") or {}).get("value")
        parts.say(
            f"{run.name}: {record['status']}"
            + (f", max {capacity:g} {settings.unit} under SLO" if capacity is not None else "")
        )


def replayed_trials(settings: TuneSettings, lower: float | None, upper: float | None) -> int:
    """The trials a full search from the target load would have run on a
    treatment whose capacity lies in [lower, upper): replayed with every load
    up to the interval's middle passing (twice the lower bound where no load
    failed)."""
    if upper is None:
        upper = 2 * lower if lower else settings.target
    middle = ((lower or 0.0) + upper) / 2
    search = settings.sweep(settings.duration, settings.tolerance).search()
    for _ in range(settings.max_trials):
        step = search.next()
        if step is None:
            break
        search.record(step.value, step.value <= middle, step.confirmation)
    return len(search.trials)


def full_grid_estimate(settings: TuneSettings, records: list[dict[str, Any]]) -> float | None:
    """What the full grid would have cost: a full search from the target load
    for every treatment (:func:`replayed_trials` on its interval, the full
    search's or else the screening's), at the engine seconds per trial the
    full searches took, start-ups and warm-ups included; failed treatments at
    what they cost. None before any full search ran."""
    measured = [r for r in records if r.get("full_trials")]
    if not measured:
        return None
    per_trial = sum(r["full_search_s"] for r in measured) / sum(r["full_trials"] for r in measured)
    trials = 0
    for record in records:
        block = record.get("capacity") or record.get("screening")
        if block and record["status"] != "failed":
            trials += replayed_trials(settings, block.get("lower"), block.get("upper"))
    failed = sum(r["engine_time_s"] for r in records if r["status"] == "failed")
    return float(per_trial * trials + failed)


def launch_yaml(settings: Mapping[str, str]) -> str:
    """The settings as YAML, each level typed as YAML reads it (``8``, ``true``)."""
    return yaml.safe_dump({k: yaml.safe_load(v) for k, v in settings.items()}, sort_keys=False)


def judged(records: list[dict[str, Any]], target: float) -> list[dict[str, Any]]:
    """The records with their comparison to the current settings, target check,
    rank and Pareto membership."""
    current = next((r for r in records if r.get("current")), None)
    order = [r["name"] for r in ranked(records)]
    front = [r["name"] for r in pareto_front(ranked(records))]
    return [
        {
            **r,
            "vs_current": None if current is None else compared(r, current),
            "meets_target": meets(r, target),
            "rank": order.index(r["name"]) + 1 if r["name"] in order else None,
            "pareto": r["name"] in front,
        }
        for r in records
    ]


def build_document(
    settings: TuneSettings,
    space: FactorSpace,
    tuner: Tuner,
    started_at: str,
    finished: bool,
) -> dict[str, Any]:
    """tune.json, checked against its contract (:class:`Tune`)."""
    records = judged(tuner.records(), settings.target)
    current = next(r for r in records if r.get("current"))
    best = recommended(records)
    meeting = [r for r in records if r.get("meets_target")]
    measured = [r for r in records if r["status"] == "measured"]
    verdict = "invalid" if not finished or not measured else ("pass" if meeting else "fail")
    engine = tuner.parts.engine
    doc = {
        "schema": TUNE_SCHEMA,
        "scenario": settings.scenario,
        "engine": engine.kind,
        "command": settings.command,
        "started_at": started_at,
        "ended_at": datetime.now().isoformat(timespec="seconds") if finished else None,
        "finished": finished,
        "target": {"mode": settings.mode, "value": settings.target, "unit": settings.unit},
        "factors": [{"name": f.name, "levels": list(f.levels)} for f in space.factors],
        "linked": [list(g) for g in space.linked],
        "exclusions": [dict(e) for e in space.exclusions],
        "search": {
            "screen_duration_s": settings.screen_duration,
            "screen_tolerance": settings.screen_tolerance,
            "duration_s": settings.duration,
            "tolerance": settings.tolerance,
            "prune": settings.prune,
        },
        "current": {"settings": current["settings"], "treatment": current["name"]},
        "treatments": records,
        "recommended": None
        if best is None
        else {
            "treatment": best["name"],
            "settings": best["settings"],
            "command_line": engine.launch_command(best["settings"]),
            "yaml": launch_yaml(best["settings"]),
            "runner_up": runner_up(records, best),
        },
        "verdict": verdict,
        "exit_code": {"pass": 0, "fail": 1, "invalid": 3}[verdict],
        "headline": headline(records, best, settings),
        "engine_time_s": sum(r.get("engine_time_s") or 0.0 for r in records),
        "full_grid_engine_time_s": full_grid_estimate(settings, records),
    }
    parse(Tune, doc, str(tuner.out / "tune.json"))
    return doc


def runner_up(records: list[dict[str, Any]], best: Mapping[str, Any]) -> dict[str, Any] | None:
    """The next best treatment and whether the recommendation beats it by more
    than the noise (:func:`against_runner_up`)."""
    found = against_runner_up(records, best)
    if found is None:
        return None
    other, comparison = found
    return {"treatment": other["name"], "comparison": comparison}


def headline(
    records: list[dict[str, Any]], best: Mapping[str, Any] | None, settings: TuneSettings
) -> str:
    """One line: the recommendation and its capacity, what was pruned and failed."""
    unit = settings.unit
    if best is None:
        text = "no treatment met every SLO at any load tried"
    else:
        text = f"{best['name']} holds {best['capacity']['value']:g} {unit} under every SLO"
    counts = {s: sum(1 for r in records if r["status"] == s) for s in ("pruned", "failed")}
    extra = [f"{n} {status}" for status, n in counts.items() if n]
    return text + (f" ({', '.join(extra)} of {len(records)})" if extra else "")


def previous_tune(out: Path) -> Tune | None:
    """The tune already in ``out`` (None when there is none), to resume."""
    path = out / "tune.json"
    return read_document(Tune, path) if path.is_file() else None
