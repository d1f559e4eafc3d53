"""`slogate capacity`: how many output events per second one load process
holds on this machine within the error bound, and so how many workers a load needs.

It runs the selftest (the real client against the exact-schedule server,
compared with the server's truth) at doubling numbers of streams and keeps the
last step whose TTFT and ITL p50/p99 all stay within ``--bound-ms`` of the
truth; the first step past the bound ends the search. A worker process is one
such process: a run that plans E output events per second needs
ceil(E / held) workers (docs/load.md, "Sizing").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from typing import Any

from slogate.locustfiles.argtypes import positive_duration, positive_float, positive_int

DEFAULT_BOUND_MS = 1.0


@dataclass(frozen=True, slots=True)
class Step:
    streams: int
    events_per_s: float
    max_abs_error_ms: float
    client_cores: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "streams": self.streams,
            "events_per_s": round(self.events_per_s, 1),
            "max_abs_error_ms": round(self.max_abs_error_ms, 4),
            "client_cores": round(self.client_cores, 3),
        }


def within(step: Step, bound_ms: float) -> bool:
    """A step counts when every compared percentile is within the bound (NaN: none measured)."""
    return step.max_abs_error_ms <= bound_ms


def search(start: int, most: int, duration_s: float, bound_ms: float) -> list[Step]:
    """Selftests at ``start``, twice that, ... up to ``most`` streams, until one
    exceeds the bound (that one included, to show where it broke)."""
    from slogate.locustfiles.selftest import run_selftest

    steps: list[Step] = []
    streams = start
    while streams <= most:
        result = run_selftest(streams=streams, duration_s=duration_s)
        step = Step(streams, result.events_per_s, result.max_abs_error_ms, result.client_cores)
        steps.append(step)
        print(
            f"slogate capacity: {streams} streams: {step.events_per_s:,.0f} events/s, "
            f"max error {step.max_abs_error_ms:.3f} ms, {step.client_cores:.2f} cores",
            flush=True,
        )
        if not within(step, bound_ms):
            break
        streams *= 2
    return steps


def held(steps: list[Step], bound_ms: float) -> Step | None:
    """The step of the most events per second within the bound."""
    good = [s for s in steps if within(s, bound_ms)]
    return max(good, key=lambda s: s.events_per_s) if good else None


def workers_needed(planned_events_per_s: float, held_events_per_s: float) -> int:
    return max(1, math.ceil(planned_events_per_s / held_events_per_s))


def add_capacity_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "capacity",
        help="output events/s one load process holds here within 1 ms, and workers needed",
    )
    p.add_argument("--scenario", help="also say how many workers this scenario's load needs")
    p.add_argument("--start", type=positive_int, default=32, help="streams of the first step")
    p.add_argument("--max-streams", type=positive_int, default=2048, help="last step at most")
    p.add_argument("--step-duration", type=positive_duration, default=5.0, help="seconds per step")
    p.add_argument("--bound-ms", type=positive_float, default=DEFAULT_BOUND_MS)
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")


def capacity_command(args: argparse.Namespace) -> int:
    from slogate import scenarios
    from slogate.analysis.slo import EXIT_CONFIG, EXIT_INVALID
    from slogate.locustfiles.processes import planned_event_rate

    loaded = None
    if args.scenario:
        try:
            loaded = scenarios.load(args.scenario)
        except scenarios.ScenarioError as error:
            print(f"slogate capacity: {error}", file=sys.stderr)
            return EXIT_CONFIG
    steps = search(args.start, args.max_streams, args.step_duration, args.bound_ms)
    best = held(steps, args.bound_ms)
    result: dict[str, Any] = {
        "bound_ms": args.bound_ms,
        "steps": [s.to_dict() for s in steps],
        "events_per_s": None if best is None else round(best.events_per_s, 1),
    }
    if best is None:
        text = f"not even {args.start} streams stay within {args.bound_ms:g} ms here"
    else:
        text = (
            f"one worker process holds {best.events_per_s:,.0f} output events/s within "
            f"{args.bound_ms:g} ms here ({best.streams} streams, {best.client_cores:.2f} cores)"
        )
        if best is steps[-1]:
            text += f"; the search stopped at --max-streams {args.max_streams}, not at the bound"
    if best is not None and loaded is not None:
        planned = planned_event_rate(loaded)
        result["scenario"] = {
            "planned_events_per_s": round(planned, 1),
            "workers": workers_needed(planned, best.events_per_s),
        }
        text += (
            f"\n{loaded[0].name}: up to {planned:,.0f} output events/s planned -> "
            f"{result['scenario']['workers']} worker(s)"
        )
    print(json.dumps(result) if args.json else text, flush=True)
    return 0 if best is not None else EXIT_INVALID
