"""`slogate capacity`: parses its flags and wires the selftests into the search.

The search and what it concludes (the held rate, the workers a scenario needs)
are :mod:`slogate.studies.generator_capacity`; each step is a selftest
(:mod:`slogate.locustfiles.selftest`), its lines are :mod:`slogate.reports.study_lines`.
"""

from __future__ import annotations

import argparse
import json
import sys

from slogate.locustfiles.argtypes import positive_duration, positive_float, positive_int
from slogate.studies.generator_capacity import DEFAULT_BOUND_MS, Selftest, Step


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", help="also say how many workers this scenario's load needs")
    p.add_argument("--start", type=positive_int, default=32, help="streams of the first step")
    p.add_argument("--max-streams", type=positive_int, default=2048, help="last step at most")
    p.add_argument("--step-duration", type=positive_duration, default=5.0, help="seconds per step")
    p.add_argument("--bound-ms", type=positive_float, default=DEFAULT_BOUND_MS)
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")


def selftest_steps(duration_s: float) -> Selftest:
    """Each step a selftest of ``duration_s`` seconds, printed as it ends."""
    from slogate.locustfiles.selftest import run_selftest
    from slogate.reports.study_lines import capacity_step_line

    def measure(streams: int) -> Step:
        result = run_selftest(streams=streams, duration_s=duration_s)
        step = Step(streams, result.events_per_s, result.max_abs_error_ms, result.client_cores)
        print(capacity_step_line(step), flush=True)
        return step

    return measure


def capacity_command(args: argparse.Namespace) -> int:
    from slogate import scenarios
    from slogate.analysis.verdict.exitcodes import EXIT_CONFIG, EXIT_INVALID
    from slogate.locustfiles.processes import planned_event_rate
    from slogate.reports.study_lines import capacity_text
    from slogate.studies.generator_capacity import capacity_result, search

    planned = None
    if args.scenario:
        try:
            loaded = scenarios.load(args.scenario)
        except scenarios.ScenarioError as error:
            print(f"slogate capacity: {error}", file=sys.stderr)
            return EXIT_CONFIG
        planned = (loaded[0].name, planned_event_rate(loaded))
    measure = selftest_steps(args.step_duration)
    steps = search(args.start, args.max_streams, args.bound_ms, measure)
    result = capacity_result(steps, args.bound_ms, planned)
    text = capacity_text(result, args.start, args.max_streams)
    print(json.dumps(result.to_dict()) if args.json else text, flush=True)
    return 0 if result.best is not None else EXIT_INVALID
