"""How many load processes a run needs: ``--processes auto``.

One gevent process reads every stream of its share on one core. Past about
half a core its reads start to come late (docs/benchmarks-history.md: chunks read together,
TTFT tails bent), so ``auto`` spreads the load over worker processes when the
planned output-event rate, at this machine's measured cost per event, would
need more than ``CORES_PER_PROCESS`` of one. The plan and the cost behind the
choice are kept as its reason, for the summary.

The planned rate is an upper bound: one event per output token (engines that
pack tokens send fewer), at the peak stage; a closed-loop stream is assumed to
stream at ``ASSUMED_ITL_S`` (a fast engine: a slower one leaves processes
idle, never overloaded) and to wait its mean think time between requests.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

from slogate.scenarios.distributions import Dist
from slogate.scenarios.limits import MAX_TOKENS
from slogate.scenarios.model import Scenario
from slogate.scenarios.workloads import ConversationsWorkload, EmbedWorkload, TraceWorkload
from slogate.scenarios.workloads.conversations import RECORDED

__all__ = ["ProcessPlan", "measure_cost_per_event_us", "plan_processes", "planned_event_rate"]

CORES_PER_PROCESS = 0.5
ASSUMED_ITL_S = 0.010
# What one event costs in a run, reading included (the loop's wake-up, recvmsg
# and the kernel's TCP receive, HTTP de-chunking), as a multiple of the parse
# and record measured here: 13.8 us in a run against 1.9 us here, one event per
# read on a quiet machine (bench/bench_hotpath.py cpu, docs/benchmarks-history.md "Hot path").
IO_FACTOR = 7.0
CALIBRATION_TOKENS = 128
CALIBRATION_REQUESTS = 40
SAMPLES = 4096


@dataclass(frozen=True, slots=True)
class ProcessPlan:
    """The chosen number of load processes and why."""

    processes: int
    events_per_s: float
    cost_us: float
    cores: float
    reason: str


def _mean(dist: Dist, integer: bool) -> float:
    rng = np.random.default_rng(0)
    draws = dist.sample_int(rng, SAMPLES) if integer else dist.sample(rng, SAMPLES)
    return float(np.mean(draws))


def mean_output_tokens(scenario: Scenario) -> float:
    """Output events per request as planned: a trace's or a recording's own
    lengths, else the workload's distribution; an embedding reply is one read."""
    workload = scenario.workload
    if isinstance(workload, EmbedWorkload):
        return 1.0
    if isinstance(workload, TraceWorkload):
        return float(np.mean(workload.trace.output_tokens))
    if isinstance(workload, ConversationsWorkload) and workload.output_tokens == RECORDED:
        replies = [t.reply_tokens for c in workload.data.conversations for t in c.turns]
        cap = workload.max_output_tokens or MAX_TOKENS
        return float(np.mean(np.minimum(replies, cap)))
    return _mean(workload.output_tokens, integer=True)


def mean_think_s(scenario: Scenario) -> float:
    return _mean(scenario.workload.think_time_s, integer=False)


def _peak(values: list[float | None]) -> float:
    return max((v for v in values if v is not None), default=0.0)


def planned_event_rate(scenarios: list[Scenario]) -> float:
    """Output events per second the run may need at its busiest stage (all
    scenarios of a mix, each with its weight's share of the users or rate)."""
    load = scenarios[0].load
    stages = load.stages
    users = _peak([load.users, *(s.users for s in stages)])
    rps = _peak([load.rate.rps if load.rate else None, *(s.rate.rps for s in stages if s.rate)])
    total_weight = sum(s.weight for s in scenarios) or 1.0
    rate = 0.0
    for scenario in scenarios:
        share = scenario.weight / total_weight
        tokens = mean_output_tokens(scenario)
        rate += share * rps * tokens
        per_stream = tokens / (tokens * ASSUMED_ITL_S + mean_think_s(scenario))
        rate += share * users * per_stream
    return rate


def measure_cost_per_event_us() -> float:
    """This machine's CPU per output event, in microseconds: a recorded stream
    parsed and recorded as a run does (SSE, JSON, record, HDR), times
    ``IO_FACTOR`` for the socket side. About 50 ms."""
    from slogate.analysis.measurement.recorder import Recorder
    from slogate.locustfiles.event_cost import chat_stream, parse_stream

    reads = [bytearray(read) for read in chat_stream(CALIBRATION_TOKENS)]
    recorder = Recorder()
    events = 0
    started = time.process_time()
    for n in range(CALIBRATION_REQUESTS):
        record = parse_stream(reads)
        recorder.record(record, float(n))
        events += len(record.chunk_ns)
    return IO_FACTOR * (time.process_time() - started) * 1e6 / events


def available_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def plan_processes(
    scenarios: list[Scenario], cost_us: float | None = None, cores: int | None = None
) -> ProcessPlan:
    """The processes ``auto`` chooses: enough that each needs at most
    ``CORES_PER_PROCESS``, no more than the cores this process may use."""
    cost_us = measure_cost_per_event_us() if cost_us is None else cost_us
    cores = available_cores() if cores is None else cores
    rate = planned_event_rate(scenarios)
    need = rate * cost_us / 1e6
    wanted = max(1, math.ceil(need / CORES_PER_PROCESS))
    chosen = min(wanted, cores)
    text = (
        f"auto: up to {rate:,.0f} output events/s planned x {cost_us:.1f} us per event "
        f"= {need:.2f} cores; at most {CORES_PER_PROCESS:g} core per process -> {chosen}"
    )
    if chosen < wanted:
        text += f" (wanted {wanted}, {cores} cores available)"
    return ProcessPlan(chosen, rate, cost_us, need, text)
