"""`slogate scenario check|sample`: see what a scenario will send before sending it."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from slogate import scenarios
from slogate.analysis.verdict.exitcodes import EXIT_CONFIG
from slogate.scenarios.burstiness import replayed_trace, trace_burstiness
from slogate.scenarios.model import Scenario


def scenario_command(args: argparse.Namespace) -> int:
    try:
        loaded = scenarios.load(args.file)
    except scenarios.ScenarioError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return EXIT_CONFIG
    if args.scenario_command == "check":
        return check(args, loaded)
    for row in scenarios.sample_requests(loaded, args.n, seed=args.seed):
        print(json.dumps(row, ensure_ascii=False))
    return 0


def check(args: argparse.Namespace, loaded: list[Scenario]) -> int:
    """Validate, then say what each scenario's data file gave and, for a trace
    replayed at its own times, how bursty it is and whether this machine can
    send it on time."""
    found: dict[str, Any] = {}
    lines = [f"{args.file}: ok: " + ", ".join(f"{s.name} (weight {s.weight:g})" for s in loaded)]
    for scenario in loaded:
        report = scenarios.dataset_report(scenario.workload)
        if report is not None:
            lines += [f"  {line}" for line in report.lines()]
        replay = replay_check(scenario, args)
        if replay is not None:
            found[scenario.name] = replay
            lines += [f"  {line}" for line in replay.pop("lines")]
    if args.json:
        print(json.dumps({"file": args.file, "scenarios": found}))
    else:
        print("\n".join(lines))
    return 0


def replay_check(scenario: Scenario, args: argparse.Namespace) -> dict[str, Any] | None:
    replayed = replayed_trace(scenario)
    if replayed is None:
        return None
    speed = replayed.speed
    table = trace_burstiness(replayed)
    result: dict[str, Any] = {
        "speed": speed,
        "burstiness": [vars_of(b) for b in table],
        "lines": ["burstiness (arrival: trace):", *(f"  {b.line()}" for b in table)],
    }
    if args.no_measure:
        return result
    from slogate.engines.exact import ExactEngine
    from slogate.locustfiles.replay_cost import MEASURING_BEHAVIOUR, measure_costs, predict

    at_speed = next(b for b in table if b.speed == speed)
    with ExactEngine(MEASURING_BEHAVIOUR) as engine:
        costs = measure_costs(scenario, engine.url, at_speed.per_ms)
    bound_ms = args.max_lag_ms or scenario.load.max_lag_ms
    prediction = predict(at_speed, replayed.times_s, costs, bound_ms)
    result["costs"] = costs.to_dict()
    result["replay"] = prediction.to_dict()
    result["lines"] += [
        f"this machine: preparing a request {costs.prepare_ms:.3f} ms + "
        f"{costs.prepare_us_per_token:.3f} us per prompt token; one of a burst "
        f"{costs.setup_us:.1f} us to set up before its instant, {costs.send_us:.1f} us to "
        f"write after it (measured on {costs.sampled} of its requests); "
        f"a sleeping process wakes {costs.wake_ms:.2f} ms late (p99)",
        prediction.line(),
    ]
    return result


def vars_of(item: Any) -> dict[str, Any]:
    """A slotted dataclass as a dict, floats rounded for reading."""
    values = {name: getattr(item, name) for name in item.__slots__}
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in values.items()}
