"""`slogate sweep`: a scenario at rising load, and the highest load its SLOs allow.

Given load levels (``--rates`` open loop, ``--users`` closed loop) it runs one
trial per level and draws throughput against the scenario's SLO percentiles,
with the knee of the curve. With ``--find-max rate|users`` it searches instead,
as MLPerf's server scenario does: grow the load until an SLO fails, bisect
between the last pass and the first fail, then confirm the result with a
longer run (``slogate.analysis.capacity.MaxSearch`` keeps the books). The result names
the max load, the SLO that limits it and what that load costs per million
tokens. Each trial is a plain `slogate run` (see :mod:`slogate.trials`).
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from slogate import scenarios
from slogate.analysis.capacity import MaxSearch, Pricing, knee_index, limiting_slo, throughput_cost
from slogate.analysis.contracts import Sweep, parse
from slogate.analysis.experiment import lookup
from slogate.analysis.history import results_folder
from slogate.analysis.slo import EXIT_CONFIG, EXIT_INVALID, percentile_of_stat
from slogate.analysis.versions import SWEEP_SCHEMA
from slogate.args import positive_duration, positive_float, positive_int
from slogate.reports.experiments import write_sweep
from slogate.reports.results import write_atomic
from slogate.target import TargetError, target_engine
from slogate.trials import (
    TrialResult,
    add_trial_options,
    log_tail,
    point_of,
    pricing_of,
    run_trial,
)

UNITS = {"rate": "requests/s", "users": "users"}
DEFAULT_KNEE = {"metric": "ttft_ms", "stat": "p99"}


def add_sweep_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a scenario at rising load; --find-max: the highest load under its SLOs",
        description="Rate or concurrency sweep with the throughput-vs-percentile curve and "
        "its knee; --find-max searches for the highest load at which every SLO passes "
        "(bisection, confirmed by a final run) and names the limiting SLO.",
    )
    p.add_argument("scenario", help="scenario YAML whose SLOs the load must meet")
    load = p.add_mutually_exclusive_group(required=True)
    load.add_argument("--rates", help="open-loop rates to run, e.g. 1,2,4,8 (requests/s)")
    load.add_argument("--users", help="closed-loop user counts to run, e.g. 1,4,16,64")
    load.add_argument("--find-max", choices=tuple(UNITS), help="search for the max rate or users")
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
    add_trial_options(p)


def has_slo(scenario: scenarios.Scenario) -> bool:
    goodput = scenario.slo.goodput
    return bool(scenario.slo.thresholds) or (
        goodput is not None and goodput.min_fraction is not None
    )


def load_levels(text: str, integer: bool) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{text!r}: expected comma-separated numbers") from None
    if not values or min(values) <= 0 or (integer and any(v != int(v) for v in values)):
        kind = "whole numbers of users" if integer else "rates"
        raise ValueError(f"{text!r}: expected positive {kind}")
    return sorted(set(values))


def trial_load(mode: str, value: float, duration: float, seed: int | None) -> dict[str, Any]:
    key = "rate" if mode == "rate" else "users"
    return {key: value if mode == "rate" else int(value), "duration": duration, "seed": seed}


EXTEND_MARGIN = 1.25


def longer_duration(result: TrialResult, duration: float, max_duration: float) -> float | None:
    """How long a rerun must last for every percentile that lacked samples to be
    bounded (with a margin, in whole seconds), capped at ``max_duration``; None when the trial was
    not short of samples or cannot be lengthened."""
    if result.verdict != "inconclusive" or duration >= max_duration:
        return None
    ratios = [
        s["needed"] / max(s["n"] or 0, 1)
        for s in slo_list(result)
        if s["verdict"] == "inconclusive" and s.get("needed")
    ]
    if not ratios:
        return None
    return min(max_duration, math.ceil(duration * max(ratios) * EXTEND_MARGIN))


class Trials:
    """Runs trials against one engine and keeps them by load level."""

    def __init__(
        self, scenario: Path, host: str, out: Path, mode: str, args: argparse.Namespace
    ) -> None:
        self.scenario, self.host, self.out, self.mode = scenario, host, out, mode
        self.seed = args.seed
        self.max_duration = args.max_duration or 10 * args.duration
        self.by_value: dict[float, list[TrialResult]] = {}
        self.order: list[tuple[float, bool, TrialResult]] = []  # every run
        self.judged: list[tuple[float, TrialResult]] = []  # the runs whose verdict counted

    def run(self, value: float, duration: float, confirmation: bool = False) -> TrialResult:
        index = len(self.order) + 1
        name = f"{index:02d}-{self.mode}-{value:g}" + ("-confirm" if confirmation else "")
        result = run_trial(
            self.scenario,
            self.host,
            self.out / "runs" / name,
            **trial_load(self.mode, value, duration, self.seed),
        )
        if result.exit_code == EXIT_CONFIG:
            raise ValueError(f"{self.scenario}: rejected by slogate run:\n{log_tail(result)}")
        self.by_value.setdefault(value, []).append(result)
        self.order.append((value, confirmation, result))
        kind = "confirmation" if confirmation else "trial"
        limit = limiting_of(result)
        why = f" ({limit})" if limit and not result.passed else ""
        print(
            f"[{index}] {kind} at {value:g} {UNITS[self.mode]}: {result.verdict}{why}", flush=True
        )
        return result

    def judge(self, value: float, duration: float, confirmation: bool = False) -> TrialResult:
        """A trial whose verdict counts: rerun once, longer, when it was too short."""
        result = self.run(value, duration, confirmation)
        longer = longer_duration(result, duration, self.max_duration)
        if longer is not None:
            result = self.run(value, longer, confirmation)
        self.judged.append((value, result))
        return result


def slo_list(result: TrialResult) -> list[Mapping[str, Any]]:
    scenarios = {} if result.summary is None else result.summary.scenarios
    return [
        {"scenario": name, **slo.model_dump()}
        for name, block in scenarios.items()
        for slo in block.slo
    ]


def limiting_of(result: TrialResult) -> str | None:
    """The SLO that failed a trial, as text with its value; the reason if invalid."""
    if result.summary is None:
        return f"no results (exit code {result.exit_code})"
    if result.verdict == "invalid":
        return "invalid run: " + "; ".join(result.summary.invalid_reasons)
    slo = limiting_slo(slo_list(result))
    if slo is None:
        return None
    value = "n/a" if slo["value"] is None else f"{slo['value']:.4g}"
    return f"{slo['scenario']}: {slo['name']} (measured {value})"


def find_max(trials: Trials, search: MaxSearch, args: argparse.Namespace) -> None:
    """Trials chosen by the search until it is over (or --max-trials ran)."""
    confirm_s = args.confirm_duration or 2 * args.duration
    for _ in range(args.max_trials):
        step = search.next()
        if step is None:
            break
        duration = confirm_s if step.confirmation else args.duration
        result = trials.judge(step.value, duration, step.confirmation)
        search.record(step.value, result.passed, step.confirmation)


def sweep(trials: Trials, search: MaxSearch, levels: list[float], args: argparse.Namespace) -> None:
    """Every level once; the search object only keeps the books (highest pass,
    lowest fail), it chooses nothing."""
    for value in levels:
        search.record(value, trials.judge(value, args.duration).passed)


def knee_of(points: list[dict[str, Any]], metric: str, stat: str) -> dict[str, Any] | None:
    stat = stat if stat in ("p50", "p90", "p95", "p99", "p999") else "p99"
    known = [(p["x"], lookup(p, ("metrics", metric, stat))) for p in points]
    known = [(x, y) for x, y in known if y is not None]
    index = knee_index([x for x, _ in known], [y for _, y in known])
    if index is None:
        return None
    x, y = known[index]
    return {"x": x, "y": y, "metric": metric, "stat": stat}


def knee_metric(slos: list[Mapping[str, Any]], limiting: Mapping[str, Any] | None) -> dict:
    """The curve to find the knee on: the limiting latency SLO's, else the first
    latency SLO's, else TTFT p99."""
    latency = [
        s for s in slos if s["metric"].endswith("_ms") and percentile_of_stat(s["stat"]) is not None
    ]
    if limiting is not None and limiting in latency:
        return {"metric": limiting["metric"], "stat": limiting["stat"]}
    if latency:
        return {"metric": latency[0]["metric"], "stat": latency[0]["stat"]}
    return DEFAULT_KNEE


def search_block(search: MaxSearch, trials: Trials, finished: bool) -> dict[str, Any]:
    return {
        "max": search.result,
        "confirmed": search.confirmed,
        "highest_pass": search.highest_pass,
        "lowest_fail": search.lowest_fail,
        "tolerance": search.tolerance,
        "finished": finished,
        "trials": [
            {
                "value": value,
                "confirmation": confirmation,
                "passed": result.passed,
                "verdict": result.verdict,
                "dir": str(result.out.relative_to(trials.out)),
                "limiting": limiting_of(result),
            }
            for value, confirmation, result in trials.order
        ],
    }


def first_failure(trials: Trials, above: float | None) -> tuple[float, TrialResult] | None:
    """The failed trial at the lowest load above ``above``: what limits the load."""
    failed = [
        (value, r)
        for value, r in trials.judged
        if not r.passed and (above is None or value > above)
    ]
    return min(failed, key=lambda item: item[0]) if failed else None


def findings_text(
    unit: str,
    best: float | None,
    limiter: tuple[float, TrialResult] | None,
    knee: Mapping[str, Any] | None,
) -> tuple[str, list[str]]:
    """The headline and the lines under it: the max, the limiting SLO, the knee."""
    limit_text = None if limiter is None else limiting_of(limiter[1])
    if best is None:
        headline = f"no load level met every SLO{f': {limit_text}' if limit_text else ''}"
    else:
        headline = f"{best:g} {unit} is the highest load meeting every SLO"
    lines = []
    if limiter is not None:
        lines.append(f"limiting SLO, broken at {limiter[0]:g} {unit}: {limit_text}")
    elif best is not None:
        lines.append(f"no SLO broke up to {best:g} {unit}: the sweep did not reach the limit")
    if knee is not None:
        lines.append(
            f"knee of {knee['metric']} {knee['stat']} vs load at {knee['x']:g} {unit} "
            f"({knee['y']:.4g} ms): latency turns steep beyond it"
        )
    else:
        lines.append(
            "no knee found: the loads tried do not show both the flat and the steep part "
            "of the latency curve (map it with --rates or --users)"
        )
    return headline, lines


def build_document(
    trials: Trials,
    args: argparse.Namespace,
    pricing: Pricing | None,
    search: MaxSearch,
    finished: bool,
) -> dict[str, Any]:
    """sweep.json: the points, the max (confirmed when searched), the limiting SLO,
    the knee and the cost at the max."""
    unit = UNITS[trials.mode]
    points = [
        point_of(f"{value:g}", value, results, trials.out, pricing)
        for value, results in sorted(trials.by_value.items())
    ]
    slos = next((slo_list(r) for _, _, r in trials.order if r.summary), [])
    best = search.result if args.find_max else search.highest_pass
    limiter = first_failure(trials, search.highest_pass)
    limiting = None if limiter is None else limiting_slo(slo_list(limiter[1]))
    knee = knee_of(points, **knee_metric(slos, limiting))
    headline, lines = findings_text(unit, best, limiter, knee)
    at_max = next((p for p in points if p["x"] == best), None)
    cost = None
    if at_max is not None:
        cost = throughput_cost(pricing, at_max["throughput"], f"max {unit} under SLO ({best:g})")
    return {
        "schema": SWEEP_SCHEMA,
        "mode": trials.mode,
        "unit": unit,
        "scenario": args.scenario,
        "created_at": datetime.now().isoformat(timespec="seconds"),
        "command": shlex.join(["slogate", *sys.argv[1:]]),
        "slo": slos,
        "points": points,
        "max": best,
        "limiting_slo": limiting,
        "knee": knee,
        "find_max": search_block(search, trials, finished) if args.find_max else None,
        "cost_at_max": cost,
        "headline": headline,
        "findings": lines,
    }


def sweep_command(args: argparse.Namespace) -> int:
    mode = args.find_max or ("rate" if args.rates else "users")
    try:
        pricing = pricing_of(args)
        levels = None if args.find_max else load_levels(args.rates or args.users, mode == "users")
        search = MaxSearch(
            start=args.start or (levels[0] if levels else 1.0),
            integer=mode == "users",
            tolerance=args.tolerance,
            ceiling=args.max_load,
        )
        scenario = scenarios.loader.resolve(args.scenario)
        declared = scenarios.load(scenario)
        if args.find_max and not any(has_slo(s) for s in declared):
            raise ValueError(f"{scenario}: declares no SLO, so no load is too much for it")
    except (ValueError, scenarios.ScenarioError) as error:
        print(f"slogate sweep: {error}", file=sys.stderr)
        return EXIT_CONFIG
    out = results_folder(f"sweep-{scenario.stem}", args.out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        with target_engine(
            args.host, args.profile, declared[0].request.api_key_env, args.speedup
        ) as host:
            trials = Trials(scenario, host, out, mode, args)
            if levels is None:
                find_max(trials, search, args)
            else:
                sweep(trials, search, levels, args)
    except TargetError as error:
        print(f"slogate sweep: {error}", file=sys.stderr)
        return error.code
    except ValueError as error:
        print(f"slogate sweep: {error}", file=sys.stderr)
        return EXIT_CONFIG
    finished = not args.find_max or search.next() is None
    doc = build_document(trials, args, pricing, search, finished)
    parse(Sweep, doc, str(out / "sweep.json"))  # the writer holds to its own contract
    write_atomic(out / "sweep.json", json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    files = write_sweep(out, doc)
    print(f"slogate: {doc['headline']}")
    for line in doc["findings"]:
        print(f"slogate: {line}")
    if doc["cost_at_max"]:
        c = doc["cost_at_max"]
        print(
            f"slogate: cost at the max: {c['per_million_output_tokens']:.4g} per million output "
            f"tokens, {c['per_million_input_tokens']:.4g} per million input tokens"
        )
    print(f"slogate: report {files['report']}")
    if not finished:
        print(f"slogate: search unfinished after {args.max_trials} trials", file=sys.stderr)
        return EXIT_INVALID
    failed = [result for _, _, result in trials.order if result.summary is None]
    if failed:
        print(f"slogate: {len(failed)} of {len(trials.order)} trials wrote no results",
              file=sys.stderr)  # fmt: skip
        return EXIT_INVALID
    return 0
