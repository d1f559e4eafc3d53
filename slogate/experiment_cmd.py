"""`slogate experiment`: parses its flags, starts each engine and wires the study.

The experiment itself (each setting's scenario and engine, the repeats
interleaved, experiment.json) is :mod:`slogate.studies.experiment`; its page,
CSVs and terminal lines are :mod:`slogate.reports`. Every trial is a plain
`slogate run` (see :mod:`slogate.trial_process`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from slogate import scenarios
from slogate.analysis.documents.history import results_folder
from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
from slogate.locustfiles.argtypes import positive_int
from slogate.reports.experiments import write_document, write_experiment
from slogate.reports.study_lines import experiment_closing_lines, experiment_trial_line
from slogate.studies.experiment import (
    FACTORS,
    ExperimentSettings,
    Setting,
    base_scenario,
    build_document,
    engine_groups,
    factor_settings,
    scenario_files,
    trial_order,
)
from slogate.studies.trials import TrialResult, trial_pricing
from slogate.target import TargetError, target_engine
from slogate.trial_process import add_trial_options, log_tail, run_trial


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Controlled experiments: prompt length, output length, concurrency, "
        "precision, speculative decoding (each load with and without). Each varies one "
        "factor over "
        "--values, holds everything else, repeats each setting and reports mean, p95 and "
        "p99 with plots, in a results folder like a run's."
    )
    p.add_argument("factor", choices=FACTORS)
    p.add_argument("--values", help="comma-separated settings (default depends on the factor)")
    p.add_argument("--repeats", type=positive_int, default=1, help="runs per setting (default 1)")
    p.add_argument("--scenario", help="base scenario YAML (default: single-turn chat, ignore_eos)")
    p.add_argument(
        "--users",
        type=positive_int,
        help="concurrent users held (default: the scenario's; 1 for the built-in one)",
    )
    p.add_argument(
        "--input-tokens", type=positive_int, default=512, help="prompt tokens held (default 512)"
    )
    p.add_argument(
        "--output-tokens", type=positive_int, default=64, help="output tokens held (default 64)"
    )
    p.add_argument(
        "--endpoint",
        action="append",
        default=[],
        metavar="NAME=URL",
        help="precision across real endpoints, each named by its weight dtype "
        "(bf16, fp16, fp8, int8, int4), e.g. --endpoint bf16=http://a:8000; speculative: "
        "--endpoint off=URL --endpoint on=URL",
    )
    add_trial_options(p)


def experiment_settings(args: argparse.Namespace) -> ExperimentSettings:
    """The flags as the study's typed settings."""
    return ExperimentSettings(
        factor=args.factor,
        duration=args.duration,
        repeats=args.repeats,
        values=args.values,
        scenario=args.scenario,
        users=args.users,
        input_tokens=args.input_tokens,
        output_tokens=args.output_tokens,
        endpoints=tuple(args.endpoint),
        host=args.host,
        profile=args.profile,
        speedup=args.speedup,
        seed=args.seed,
        command=shlex.join(["slogate", *sys.argv[1:]]),
    )


def run_settings(
    settings: ExperimentSettings, items: list[Setting], files: dict[str, Path], out: Path
) -> dict[str, list[TrialResult]]:
    """Every trial, engine group by engine group; results by setting label."""
    results: dict[str, list[TrialResult]] = {s.label: [] for s in items}
    total, done = len(items) * settings.repeats, 0
    for group in engine_groups(items):
        key_env = scenarios.load(files[group[0].label])[0].request.api_key_env
        with target_engine(group[0].host, group[0].profile, key_env, settings.speedup) as host:
            for repeat, s in trial_order(group, settings.repeats):
                result = run_trial(
                    files[s.label],
                    host,
                    out / "runs" / f"{s.label}-r{repeat}",
                    users=s.users,
                    duration=settings.duration,
                    seed=settings.seed,
                )
                done += 1
                line = experiment_trial_line(
                    settings.factor,
                    s.label,
                    repeat,
                    result.verdict,
                    result.first_scenario,
                    result.exit_code,
                    result.out,
                )
                print(f"[{done}/{total}] {line}", flush=True)
                if result.exit_code == EXIT_CONFIG:
                    raise ValueError(
                        f"trial {result.out} rejected its scenario:\n{log_tail(result)}"
                    )
                results[s.label].append(result)
    return results


def experiment_command(args: argparse.Namespace) -> int:
    settings = experiment_settings(args)
    try:
        pricing = trial_pricing(args.gpu_price_per_hour, args.gpus, args.host, args.profile)
        items = factor_settings(settings)
        base = base_scenario(settings)
        out = results_folder(f"experiment-{settings.factor}", args.out)
        files = scenario_files(items, base, out)
    except (ValueError, scenarios.ScenarioError) as error:
        print(f"slogate experiment: {error}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        results = run_settings(settings, items, files, out)
    except TargetError as error:
        print(f"slogate experiment: {error}", file=sys.stderr)
        return error.code
    except ValueError as error:
        print(f"slogate experiment: {error}", file=sys.stderr)
        return EXIT_CONFIG
    doc = build_document(settings, items, results, out, pricing)
    write_document(out / "experiment.json", doc)
    written = write_experiment(out, doc)
    print("\n".join(experiment_closing_lines(doc, written["report"])))
    failed = [r for rs in results.values() for r in rs if r.summary is None]
    return EXIT_INVALID if failed else 0
