"""`slogate experiment`: the four controlled experiments of inference performance testing.

Change one factor, hold the rest, repeat, read mean, p95 and p99:

- ``prompt-length``: fixed input lengths -> TTFT (prefill grows with the prompt);
- ``output-length``: fixed output lengths (``ignore_eos``) -> TPOT (stable);
- ``concurrency``: closed-loop users -> throughput against per-request latency;
- ``precision``: weight data types on the simulated engine (one engine per
  type), or endpoints the user names by their type -> memory and speed.

Every trial is a plain `slogate run` (see :mod:`slogate.trials`); this module
derives each trial's scenario, runs the trials with their repeats interleaved
(so a drift in the engine spreads over every setting instead of biasing one),
pools them into points and writes ``experiment.json``, CSVs and a report.
"""

from __future__ import annotations

import argparse
import copy
import json
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from slogate import scenarios
from slogate.analysis.capacity import Pricing
from slogate.analysis.contracts import Experiment, parse
from slogate.analysis.experiment import EXPECTATIONS, trend
from slogate.analysis.history import results_folder
from slogate.analysis.slo import EXIT_CONFIG, EXIT_INVALID
from slogate.analysis.versions import EXPERIMENT_SCHEMA
from slogate.args import positive_int
from slogate.reports.experiments import write_experiment
from slogate.reports.results import write_atomic
from slogate.scenarios.loader import read_yaml, resolve
from slogate.simengine.profiles import DEFAULT_PROFILE, WEIGHT_BYTES, load_profile
from slogate.target import TargetError, target_engine
from slogate.trials import (
    TrialResult,
    add_trial_options,
    log_tail,
    point_of,
    pricing_of,
    run_trial,
    write_scenario,
)

FACTORS = ("prompt-length", "output-length", "concurrency", "precision")
DEFAULT_VALUES = {
    "prompt-length": "128,512,2048,8192",
    "output-length": "32,128,512,1024",
    "concurrency": "1,2,4,8,16,32",
    "precision": "bf16,fp8,int4",
}
X_LABELS = {
    "prompt-length": "prompt tokens",
    "output-length": "output tokens",
    "concurrency": "concurrent users",
    "precision": "bytes per weight",
}
TITLES = {
    "prompt-length": "prompt length",
    "output-length": "output length",
    "concurrency": "concurrency",
    "precision": "weight precision",
}


def add_experiment_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "experiment",
        help="a controlled experiment: vary one factor, hold the rest, repeat",
        description="Controlled experiments: prompt length, output length, concurrency, "
        "precision. Each varies one factor over "
        "--values, holds everything else, repeats each setting and reports mean, p95 and "
        "p99 with plots, in a results folder like a run's.",
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
        metavar="DTYPE=URL",
        help="precision across real endpoints, each named by its weight dtype "
        "(bf16, fp16, fp8, int8, int4), e.g. --endpoint bf16=http://a:8000",
    )
    add_trial_options(p)


@dataclass(frozen=True)
class Setting:
    """One value of the factor: its label, x (for plots and trends), the trial's
    scenario changes and load, and the engine it runs on."""

    label: str
    x: float
    workload: dict[str, Any]
    users: int | None  # None: as the scenario says
    host: str | None
    profile: str | None
    weight_bytes: int | None = None


def base_scenario(factor: str, args: argparse.Namespace) -> dict[str, Any]:
    """The scenario the factor's settings are applied to: the user's, or a
    single-turn chat whose lengths are fixed and whose output ends at max_tokens."""
    if args.scenario:
        path = resolve(args.scenario)
        raw = read_yaml(path)
        if not isinstance(raw, dict) or "workload" not in raw:
            raise ValueError(f"{path}: an experiment needs a single scenario with a workload")
        return raw
    return {
        "name": factor,
        "api": "chat",
        "model": "auto",
        "workload": {
            "kind": "chat",
            "input_tokens": args.input_tokens,
            "output_tokens": args.output_tokens,
            "turns": 1,
            "think_time_s": 0,
        },
        "load": {"users": 1, "duration": "20s"},
        "request": {"ignore_eos": True},
    }


def integers(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--values {text!r}: expected comma-separated {what}") from None
    if not values or min(values) < 1:
        raise ValueError(f"--values {text!r}: expected {what} of at least 1")
    return values


def factor_settings(factor: str, args: argparse.Namespace) -> list[Setting]:
    """The factor's settings from --values (or --endpoint for real precision runs)."""
    items = precision_settings(args, args.users) if factor == "precision" else sized(factor, args)
    labels = [s.label for s in items]
    if len(set(labels)) != len(labels):
        raise ValueError(f"each setting once, please: {', '.join(labels)}")
    return items


def sized(factor: str, args: argparse.Namespace) -> list[Setting]:
    """Settings of the factors given as numbers (lengths, users)."""
    text = args.values or DEFAULT_VALUES[factor]
    what = "user counts" if factor == "concurrency" else "token counts"
    out = []
    for value in integers(text, what):
        workload = {
            "prompt-length": {"input_tokens": value},
            "output-length": {"output_tokens": value},
            "concurrency": {},
        }[factor]
        n = value if factor == "concurrency" else args.users
        out.append(Setting(str(value), float(value), workload, n, args.host, args.profile))
    return out


def precision_settings(args: argparse.Namespace, users: int | None) -> list[Setting]:
    if args.endpoint:
        if args.values or args.host:
            raise ValueError("with --endpoint, the endpoints are the values: drop --values/--host")
        out = []
        for item in args.endpoint:
            dtype, sep, url = item.partition("=")
            if not sep or dtype.lower() not in WEIGHT_BYTES:
                raise ValueError(
                    f"--endpoint {item!r}: expected DTYPE=URL with DTYPE one of "
                    f"{', '.join(WEIGHT_BYTES)}"
                )
            out.append(Setting(dtype, WEIGHT_BYTES[dtype.lower()], {}, users, url, None))
        return out
    if args.host:
        raise ValueError(
            "a precision experiment needs one engine per precision: name them with "
            "--endpoint DTYPE=URL, or drop --host to use the simulated engine"
        )
    out = []
    for dtype in (args.values or DEFAULT_VALUES["precision"]).split(","):
        profile = load_profile(args.profile or DEFAULT_PROFILE, weight_dtype=dtype.strip())
        x = WEIGHT_BYTES[profile.weight_dtype]
        out.append(
            Setting(profile.weight_dtype, x, {}, users, None, profile.name, profile.weight_bytes)
        )
    return out


def trial_scenario(base: dict[str, Any], setting: Setting) -> dict[str, Any]:
    raw = copy.deepcopy(base)
    raw["workload"].update(setting.workload)
    if "output_tokens" in setting.workload:
        raw.setdefault("request", {})["ignore_eos"] = True
    return raw


def engine_groups(items: list[Setting]) -> list[list[Setting]]:
    """Settings that share an engine, in order: one group unless each setting
    names its own engine (precision)."""
    groups: dict[tuple[str | None, str | None], list[Setting]] = {}
    for s in items:
        groups.setdefault((s.host, s.profile), []).append(s)
    return list(groups.values())


def trial_order(group: list[Setting], repeats: int) -> Iterator[tuple[int, Setting]]:
    """Repeats interleaved: every setting once, then every setting again."""
    for repeat in range(1, repeats + 1):
        for s in group:
            yield repeat, s


def describe_trial(setting: Setting, repeat: int, result: TrialResult, factor: str) -> str:
    block = result.first_scenario
    if block is None:
        return f"{factor} {setting.label} (repeat {repeat}): no results (exit {result.exit_code})"
    ttft, tpot = block.metrics["ttft_ms"], block.metrics["tpot_ms"]
    return (
        f"{factor} {setting.label} (repeat {repeat}): {result.verdict}, "
        f"TTFT mean {ttft.mean or 0:.1f} ms p99 {ttft.p99 or 0:.1f} ms, "
        f"TPOT mean {tpot.mean or 0:.2f} ms, "
        f"{block.throughput.output_tokens_per_s or 0:.0f} output tokens/s -> {result.out}"
    )


def scenario_files(items: list[Setting], base: dict[str, Any], out: Path) -> dict[str, Path]:
    """Each setting's scenario, written and validated before any load is sent."""
    files = {}
    for s in items:
        files[s.label] = write_scenario(
            out / "scenarios" / f"{s.label}.yaml", trial_scenario(base, s)
        )
        scenarios.load(files[s.label])
    return files


def run_settings(
    factor: str,
    items: list[Setting],
    files: dict[str, Path],
    out: Path,
    args: argparse.Namespace,
) -> dict[str, list[TrialResult]]:
    """Every trial, engine group by engine group; results by setting label."""
    results: dict[str, list[TrialResult]] = {s.label: [] for s in items}
    total, done = len(items) * args.repeats, 0
    for group in engine_groups(items):
        key_env = scenarios.load(files[group[0].label])[0].request.api_key_env
        with target_engine(group[0].host, group[0].profile, key_env, args.speedup) as host:
            for repeat, s in trial_order(group, args.repeats):
                result = run_trial(
                    files[s.label],
                    host,
                    out / "runs" / f"{s.label}-r{repeat}",
                    users=s.users,
                    duration=args.duration,
                    seed=args.seed,
                )
                done += 1
                print(f"[{done}/{total}] {describe_trial(s, repeat, result, factor)}", flush=True)
                if result.exit_code == EXIT_CONFIG:
                    raise ValueError(
                        f"trial {result.out} rejected its scenario:\n{log_tail(result)}"
                    )
                results[s.label].append(result)
    return results


def held_description(factor: str, args: argparse.Namespace) -> dict[str, Any]:
    held: dict[str, Any] = {
        "scenario": args.scenario or "built-in single-turn chat, ignore_eos",
        "duration per run (s)": args.duration,
        "repeats": args.repeats,
        "engine": args.host or "simulated engine",
        "profile": None if args.host else (args.profile or "default"),
        "speedup": None if args.host else args.speedup,
    }
    if factor != "concurrency":
        held["concurrent users"] = args.users or ("as the scenario" if args.scenario else 1)
    if not args.scenario and factor != "prompt-length":
        held["prompt tokens"] = args.input_tokens
    if not args.scenario and factor != "output-length":
        held["output tokens"] = args.output_tokens
    return held


def build_document(
    factor: str,
    items: list[Setting],
    results: dict[str, list[TrialResult]],
    out: Path,
    args: argparse.Namespace,
    pricing: Pricing | None,
) -> dict[str, Any]:
    points = []
    for s in items:
        point = point_of(s.label, s.x, results[s.label], out, pricing)
        point.update(profile=s.profile, host=s.host, weight_bytes=s.weight_bytes)
        points.append(point)
    trends = [trend(e, points) for e in EXPECTATIONS[factor]]
    trends = [t for t in trends if t.xs]  # an unmeasured quantity (endpoint memory) is no trend
    return {
        "schema": EXPERIMENT_SCHEMA,
        "factor": factor,
        "title": f"Experiment: {TITLES[factor]}",
        "x_label": X_LABELS[factor],
        "values": [s.label for s in items],
        "repeats": args.repeats,
        "held": held_description(factor, args),
        "created_at": datetime.now().isoformat(timespec="seconds"),
        "command": shlex.join(["slogate", *sys.argv[1:]]),
        "points": points,
        "trends": [{**t.to_dict(), "text": t.describe()} for t in trends],
    }


def experiment_command(args: argparse.Namespace) -> int:
    factor = args.factor
    try:
        pricing = pricing_of(args)
        items = factor_settings(factor, args)
        base = base_scenario(factor, args)
        out = results_folder(f"experiment-{factor}", args.out)
        files = scenario_files(items, base, out)
    except (ValueError, scenarios.ScenarioError) as error:
        print(f"slogate experiment: {error}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        results = run_settings(factor, items, files, out, args)
    except TargetError as error:
        print(f"slogate experiment: {error}", file=sys.stderr)
        return error.code
    except ValueError as error:
        print(f"slogate experiment: {error}", file=sys.stderr)
        return EXIT_CONFIG
    doc = build_document(factor, items, results, out, args, pricing)
    parse(Experiment, doc, str(out / "experiment.json"))  # the writer holds to its own contract
    write_atomic(out / "experiment.json", json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    files = write_experiment(out, doc)
    for t in doc["trends"]:
        print(f"slogate: {t['text']}")
    print(f"slogate: report {files['report']}")
    failed = [r for rs in results.values() for r in rs if r.summary is None]
    return EXIT_INVALID if failed else 0
