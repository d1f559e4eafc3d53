"""`slogate sweep`: parses its flags, starts the engine and wires the study.

The sweep itself (which load to try next, when a trial is rerun, the knee, the
findings, sweep.json) is :mod:`slogate.studies.sweep`; its page, CSVs and
terminal lines are :mod:`slogate.reports`. Each trial is a plain `slogate run`
(see :mod:`slogate.trial_process`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from slogate import scenarios
from slogate.analysis.documents.history import results_folder
from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
from slogate.locustfiles.argtypes import positive_duration, positive_float, positive_int
from slogate.reports.experiments import write_document, write_sweep
from slogate.reports.study_lines import sweep_closing_lines, sweep_trial_line
from slogate.scenarios.loader import resolve
from slogate.studies.sweep import (
    UNITS,
    Mode,
    SweepSettings,
    TrialRunner,
    TrialSpec,
    build_document,
    limiting_of,
    load_levels,
    require_slo,
    run_sweep,
    unjudged,
)
from slogate.studies.trials import TrialResult, trial_pricing
from slogate.target import TargetError, target_engine
from slogate.trial_process import add_trial_options, log_tail, run_trial


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Rate or concurrency sweep with the throughput-vs-percentile curve and "
        "its knee; --find-max searches for the highest load at which every SLO passes "
        "(bisection, confirmed by a final run) and names the limiting SLO."
    )
    p.add_argument("scenario", help="scenario YAML whose SLOs the load must meet")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--rates", help="open-loop rates to run, e.g. 1,2,4,8 (requests/s)")
    load.add_argument("--users", help="closed-loop user counts to run, e.g. 1,4,16,64")
    load.add_argument(
        "--find-max",
        nargs="?",
        const="auto",
        choices=(*UNITS, "sessions", "auto"),
        help="search for the max rate, users or (agent trees) concurrent sessions; alone, "
        "what the scenario's load is: rate in open loop, else users (sessions)",
    )
    p.add_argument("--start", type=positive_float, help="--find-max: first load tried (default 1)")
    p.add_argument(
        "--max", dest="max_load", type=positive_float, help="--find-max: never offer more"
    )
    p.add_argument(
        "--tolerance",
        type=positive_float,
        default=0.1,
        help="--find-max: stop when the bracket is this fraction of the load (0.1)",
    )
    p.add_argument(
        "--confirm-duration",
        type=positive_duration,
        help="--find-max: length of the confirmation run (default 2 x --duration)",
    )
    p.add_argument(
        "--max-trials", type=positive_int, default=16, help="--find-max: give up after this many"
    )
    p.add_argument(
        "--max-duration",
        type=positive_duration,
        help="a trial too short to bound a percentile (inconclusive) is rerun longer, "
        "up to this (default 10 x --duration)",
    )
    p.add_argument(
        "--keep-climbing",
        action="store_true",
        help="--rates/--users: run the higher levels even after one failed, was invalid "
        "or went past saturation (by default the sweep stops climbing there)",
    )
    add_trial_options(p)


def sweep_mode(find_max: str | None, open_loop: bool, rates: bool) -> Mode:
    """What ``--find-max`` searches (``auto``: the scenario's own load; agent
    trees' sessions are users), else what the levels given are."""
    if find_max == "rate" or (find_max == "auto" and open_loop):
        return "rate"
    if find_max is not None:
        return "users"
    return "rate" if rates else "users"


def sweep_settings(args: argparse.Namespace, declared: list[scenarios.Scenario]) -> SweepSettings:
    """The flags as the study's typed settings; bad load levels raise ValueError.
    ``--find-max`` alone searches the scenario's own kind of load."""
    first = declared[0]
    mode = sweep_mode(args.find_max, first.load.open_loop, bool(args.rates))
    levels = () if args.find_max else tuple(load_levels(args.rates or args.users, mode == "users"))
    return SweepSettings(
        scenario=args.scenario,
        mode=mode,
        duration=args.duration,
        levels=levels,
        find_max=bool(args.find_max),
        start=args.start,
        ceiling=args.max_load,
        tolerance=args.tolerance,
        confirm_duration=args.confirm_duration,
        max_trials=args.max_trials,
        max_duration=args.max_duration,
        seed=args.seed,
        keep_climbing=args.keep_climbing,
        command=shlex.join(["slogate", *sys.argv[1:]]),
        sessions=first.workload.kind == "agent-trace",
        tiers=tuple((name, spec.thresholds) for s in declared for name, spec in s.slo_tiers),
    )


def trial_runner(scenario: Path, host: str, out: Path, unit: str) -> TrialRunner:
    """Each trial a `slogate run` under ``out/runs``, its verdict printed as it ends."""

    def run(spec: TrialSpec) -> TrialResult:
        result = run_trial(scenario, host, out / "runs" / spec.name, **spec.load)
        if result.exit_code == EXIT_CONFIG:
            raise ValueError(f"{scenario}: rejected by slogate run:\n{log_tail(result)}")
        limiting = limiting_of(result)
        print(
            sweep_trial_line(
                spec.index, spec.value, unit, spec.confirmation, result.verdict, limiting
            ),
            flush=True,
        )
        return result

    return run


def sweep_command(args: argparse.Namespace) -> int:
    try:
        pricing = trial_pricing(args.gpu_price_per_hour, args.gpus, args.host, args.profile)
        scenario = resolve(args.scenario)
        declared = scenarios.load(scenario)
        settings = sweep_settings(args, declared)
        search = settings.search()
        if settings.find_max:
            require_slo(scenario, declared)
    except (ValueError, scenarios.ScenarioError) as error:
        print(f"slogate sweep: {error}", file=sys.stderr)
        return EXIT_CONFIG
    out = results_folder(f"sweep-{scenario.stem}", args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with target_engine(
            args.host, args.profile, declared[0].request.api_key_env, args.speedup
        ) as host:
            run = run_sweep(settings, search, trial_runner(scenario, host, out, settings.unit))
    except TargetError as error:
        print(f"slogate sweep: {error}", file=sys.stderr)
        return error.code
    except ValueError as error:
        print(f"slogate sweep: {error}", file=sys.stderr)
        return EXIT_CONFIG
    doc = build_document(run, out, pricing)
    write_document(out / "sweep.json", doc)
    files = write_sweep(out, doc)
    print("\n".join(sweep_closing_lines(doc, files["report"])))
    if not run.finished:
        print(f"slogate: search unfinished after {args.max_trials} trials", file=sys.stderr)
        return EXIT_INVALID
    failed = unjudged(run)
    if failed:
        print(f"slogate: {len(failed)} of {len(run.trials.order)} trials wrote no results",
              file=sys.stderr)  # fmt: skip
        return EXIT_INVALID
    return 0
