"""`slogate tune`: parses its flags, builds the engine and the treatments, wires the study.

The tune itself (screening, pruning, the full searches, resuming, tune.json)
is :mod:`slogate.studies.tune`; each trial is a plain `slogate run`
(:mod:`slogate.trial_process`) against the treatment's engine.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from slogate import scenarios
from slogate.analysis.documents.history import results_folder
from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
from slogate.engines.template import TemplateUnderTune
from slogate.engines.tunable import EngineUnderTune, SimulatedUnderTune
from slogate.engines.tunable_served import LlamaCppUnderTune, VllmUnderTune
from slogate.locustfiles.argtypes import (
    non_negative_int,
    positive_duration,
    positive_float,
    positive_int,
)
from slogate.reports.experiments import write_document
from slogate.reports.study_lines import tune_closing_lines
from slogate.reports.tune import write_tune
from slogate.scenarios.loader import resolve
from slogate.simengine.profiles import DEFAULT_PROFILE
from slogate.studies.sweep import UNITS, Mode, require_slo, trial_load
from slogate.studies.tune import TuneParts, Tuner, TuneSettings, build_document, previous_tune
from slogate.studies.tune_factors import (
    Factor,
    FactorSpace,
    Treatment,
    current_settings,
    parse_assignments,
    parse_set,
    read_factors,
    treatments,
    with_current,
)
from slogate.studies.tune_from import remedies_linked, treatments_from_run
from slogate.sweep_cmd import trial_runner
from slogate.trial_process import run_trial

ENGINES = ("simulated", "template", "llamacpp", "vllm")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Restart an engine per combination of its settings, find each one's highest load "
        "under every SLO (a short screening search, then the full search for those that "
        "may be the best), and recommend the settings; see docs/tune.md."
    )
    p.add_argument("scenario", help="scenario YAML whose SLOs every treatment must meet")
    p.add_argument("--engine", choices=ENGINES, default="simulated")
    p.add_argument("--profile", help=f"simulated engine profile (default {DEFAULT_PROFILE})")
    p.add_argument("--speedup", type=positive_float, default=1.0, help="simulated engine speedup")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="a factor and its levels (repeatable)",
    )
    p.add_argument("--factors", help="YAML file of factors, linked factors and exclusions")
    p.add_argument(
        "--from",
        dest="from_run",
        metavar="RUN_DIR",
        help="a failed run: factors around the settings its diagnosis names",
    )
    p.add_argument(
        "--current",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="today's setting of a factor (default: the engine's own default)",
    )
    target = p.add_mutually_exclusive_group()
    target.add_argument("--target-rate", type=positive_float, help="load to hold, requests/s")
    target.add_argument("--target-users", type=positive_int, help="load to hold, users")
    p.add_argument(
        "--duration",
        "-t",
        type=positive_duration,
        default=10.0,
        help="length of each full-search trial (default 10s)",
    )
    p.add_argument(
        "--screen-duration",
        type=positive_duration,
        default=3.0,
        help="length of each screening trial (default 3s)",
    )
    p.add_argument("--tolerance", type=positive_float, default=0.1)
    p.add_argument("--screen-tolerance", type=positive_float, default=0.5)
    p.add_argument(
        "--no-prune",
        action="store_true",
        help="no screening: a full search for every treatment (the full grid)",
    )
    p.add_argument(
        "--warmup",
        type=positive_duration,
        default=2.0,
        help="load before each engine's caches are reset (default 2s)",
    )
    p.add_argument("--max-trials", type=positive_int, default=16)
    p.add_argument("--seed", type=non_negative_int, help="workload seed")
    p.add_argument("--gpus", type=positive_int, help="GPUs per treatment (default: the profile's)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", help="results folder (default results/<time>-tune-<name>)")
    where.add_argument("--resume", metavar="DIR", help="go on with the tune in DIR")
    template = p.add_argument_group("--engine template")
    template.add_argument("--start-command", help="start command, {factor} and {port} filled in")
    template.add_argument(
        "--ready-url", help="polled until it answers 200, e.g. http://127.0.0.1:{port}/health"
    )
    template.add_argument(
        "--stop-command", help="stop command (default: SIGTERM the start's group)"
    )
    template.add_argument("--engine-url", help="the API's base URL (default: the ready URL's host)")
    template.add_argument("--reset-url", help="POSTed to empty the engine's caches")
    template.add_argument("--ready-timeout", type=positive_duration, default=600.0)


def factor_space(args: argparse.Namespace, diagnosed: FactorSpace | None = None) -> FactorSpace:
    """The factors of --factors, --set and (``diagnosed``) --from, together."""
    spaces = [parse_set(args.set)] if args.set else []
    if args.factors:
        spaces.insert(0, read_factors(Path(args.factors)))
    if diagnosed is not None:
        spaces.insert(0, diagnosed)
    if not spaces:
        raise ValueError("no factors: give --set NAME=V1,V2, --factors FILE or --from RUN_DIR")
    space = spaces[0]
    for other in spaces[1:]:
        space = space.merged(other)
    return space


def from_run(args: argparse.Namespace, engine: EngineUnderTune) -> FactorSpace:
    """--from RUN_DIR: levels around the settings the failed run's diagnosis names."""
    current = {**engine.defaults(), **parse_assignments(args.current, "--current")}
    run_dir = Path(args.from_run)
    levels = treatments_from_run(run_dir, engine.kind, current)
    return FactorSpace(
        tuple(Factor(name, tuple(values)) for name, values in levels.items()),
        linked=remedies_linked(run_dir, engine.kind, levels),
    )


def engine_under_tune(args: argparse.Namespace, names: tuple[str, ...]) -> EngineUnderTune:
    """The engine ``--engine`` names, with its defaults: for llama.cpp and vLLM
    the ones `slogate engine` installs."""
    if args.engine == "simulated":
        return SimulatedUnderTune(args.profile or DEFAULT_PROFILE, args.speedup)
    if args.engine == "template":
        if not args.start_command or not args.ready_url:
            raise ValueError("--engine template needs --start-command and --ready-url")
        return TemplateUnderTune(
            start_command=args.start_command,
            ready_url=args.ready_url,
            factors=names,
            stop_command=args.stop_command,
            base_url=args.engine_url,
            reset_url=args.reset_url,
            ready_timeout_s=args.ready_timeout,
        )
    if args.engine == "llamacpp":
        return LlamaCppUnderTune()
    return VllmUnderTune()


def gpus_of(
    args: argparse.Namespace, engine: EngineUnderTune
) -> Callable[[Mapping[str, str]], int]:
    """GPUs per treatment: --gpus, else the simulated profile's tensor parallelism, else 1."""
    if args.gpus is None and isinstance(engine, SimulatedUnderTune):
        return engine.gpus
    gpus: int = args.gpus or 1
    return lambda settings: gpus


def tune_settings(args: argparse.Namespace, declared: list[scenarios.Scenario]) -> TuneSettings:
    """The target load: the flag given, else the scenario's own (rate or users)."""
    load = declared[0].load
    mode: Mode
    if args.target_rate or args.target_users:
        mode = "rate" if args.target_rate else "users"
        target = float(args.target_rate or args.target_users)
    elif load.rate is not None:
        mode, target = "rate", load.rate.rps
    else:
        mode, target = "users", float(load.users or 1)
    return TuneSettings(
        scenario=args.scenario,
        mode=mode,
        unit=UNITS[mode],
        target=target,
        duration=args.duration,
        screen_duration=args.screen_duration,
        tolerance=args.tolerance,
        screen_tolerance=args.screen_tolerance,
        prune=not args.no_prune,
        warmup=args.warmup,
        max_trials=args.max_trials,
        seed=args.seed,
        command=shlex.join(["slogate", *sys.argv[1:]]),
    )


def interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def write_outputs(out: Path, doc: Mapping[str, Any]) -> dict[str, Path]:
    """tune.json, tune.html and the treatments' CSV."""
    files = {"json": write_document(out / "tune.json", doc)}
    return {**files, **write_tune(out, doc)}


@dataclass(frozen=True)
class Plan:
    """A tune checked whole before any engine starts."""

    scenario: Path
    space: FactorSpace
    engine: EngineUnderTune
    chosen: list[Treatment]
    settings: TuneSettings
    out: Path
    started_at: str


def planned(args: argparse.Namespace) -> Plan:
    """The flags as a tune: every treatment checked by its engine, the folder
    to write (or resume: the same treatments, its start time kept); ValueError
    or ScenarioError naming what is wrong."""
    scenario = resolve(args.scenario)
    declared = scenarios.load(scenario)
    require_slo(scenario, declared)
    if args.from_run:
        if args.engine == "template":
            raise ValueError("--from: the template engine's settings are unknown to a diagnosis")
        engine = engine_under_tune(args, ())
        space = factor_space(args, from_run(args, engine))
    else:
        space = factor_space(args)
        engine = engine_under_tune(args, space.names)
    grid = treatments(space)
    if not grid:
        raise ValueError("every treatment is excluded: nothing to tune")
    for treatment in grid:
        engine.check(treatment.settings)
    given = parse_assignments(args.current, "--current")
    current = current_settings(space.names, engine.defaults(), given)
    engine.check(current)
    chosen = with_current(grid, current)
    settings = tune_settings(args, declared)
    settings.check()
    out = Path(args.resume) if args.resume else results_folder(f"tune-{scenario.stem}", args.out)
    before = previous_tune(out)
    if args.resume and before is None:
        raise ValueError(f"--resume {out}: no tune.json there")
    if before is not None and [t.name for t in before.treatments] != [t.name for t in chosen]:
        raise ValueError(f"{out}: holds a tune of other treatments; resume it with its flags")
    started = datetime.now().isoformat(timespec="seconds")
    return Plan(
        scenario, space, engine, chosen, settings, out, before.started_at if before else started
    )


def tune_command(args: argparse.Namespace) -> int:
    try:
        plan = planned(args)
    except (ValueError, scenarios.ScenarioError) as error:
        print(f"slogate tune: {error}", file=sys.stderr)
        return EXIT_CONFIG
    scenario, settings, out, space = plan.scenario, plan.settings, plan.out, plan.space
    out.mkdir(parents=True, exist_ok=True)
    mode, unit = settings.mode, settings.unit

    def warmup(url: str, folder: Path) -> None:
        run_trial(scenario, url, folder, **trial_load(mode, settings.target, settings.warmup, None))

    parts = TuneParts(
        engine=plan.engine,
        runner_for=lambda url, folder: trial_runner(scenario, url, folder, unit),
        gpus=gpus_of(args, plan.engine),
        say=lambda line: print(f"slogate: {line}", flush=True),
    )

    def progress() -> None:
        doc = build_document(settings, space, tuner, plan.started_at, False)
        write_document(out / "tune.json", doc)

    tuner = Tuner(settings, parts, warmup, out, plan.chosen, progress)
    progress()
    signal.signal(signal.SIGTERM, interrupted)
    finished = False
    try:
        tuner.run()
        finished = True
    except ValueError as error:  # slogate run refused the scenario: no treatment can run
        print(f"slogate tune: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        print("slogate tune: interrupted; finished treatments are kept (--resume)", file=sys.stderr)
    doc = build_document(settings, space, tuner, plan.started_at, finished)
    files = write_outputs(out, doc)
    print("\n".join(tune_closing_lines(doc, files)))
    return int(doc["exit_code"]) if finished else EXIT_INVALID
