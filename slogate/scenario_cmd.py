"""`slogate scenario check|sample`: see what a scenario will send before sending it."""

from __future__ import annotations

import argparse
import json
import sys

from slogate import scenarios
from slogate.analysis.slo import EXIT_CONFIG


def scenario_command(args: argparse.Namespace) -> int:
    try:
        loaded = scenarios.load(args.file)
    except scenarios.ScenarioError as error:
        print(f"slogate: {error}", file=sys.stderr)
        return EXIT_CONFIG
    if args.scenario_command == "check":
        names = ", ".join(f"{s.name} (weight {s.weight:g})" for s in loaded)
        print(f"{args.file}: ok: {names}")
        for scenario in loaded:
            report = scenarios.dataset_report(scenario.workload)
            if report is not None:
                print("\n".join(f"  {line}" for line in report.lines()))
        return 0
    for row in scenarios.sample_requests(loaded, args.n, seed=args.seed):
        print(json.dumps(row, ensure_ascii=False))
    return 0
