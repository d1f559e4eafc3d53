"""Can this machine replay a trace on time? Measured costs and the prediction.

Two things make an open-loop replay late (docs/load.md, "lag by cause"):
building prompts (the look-ahead plans and encodes each request on the load
process's one core) and sending a burst (each request of a burst is a
greenlet that writes in turn, so the last one leaves after all the others).
Both are measured here on this machine with the scenario's own requests: the
preparation of a sample of its arrivals, fitted as a cost per request plus a
cost per prompt token, and a burst of real sends through the real client to
the exact-schedule server on loopback, handed over ahead of its instant as
the look-ahead does: what each send does before its gate (spawned, a slot,
its exchange set up) and, once the gate opens, its write. And how late this
machine wakes a sleeping process (``WAKES`` sleeps of 10 to 60 ms, their p99
lateness): a dispatcher sleeps until each instant's lead, and on a machine
whose cores other work holds, the wake-up is late whatever slogate does.

The prediction (:func:`predict`) is arithmetic on those costs and the
trace's burstiness at the chosen speed: the look-ahead's share of a core in
the trace's busiest second (at most ``PREPARE_SHARE_MAX``, the rest reads
the streams), and how late the largest burst's last request leaves: its
writes after the instant, plus whatever of the wake-up and the set-up did
not fit in the lead (at most the lag bound). ``--processes N`` divides the
preparation and the burst (each process builds and sends its shard of every
burst); a lower speed divides only the first: a burst stays a burst at any
speed. Neither makes the machine wake sooner.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass

import gevent
import numpy as np

from slogate.client.streaming import PreparedRequest, StreamClient
from slogate.locustfiles.lookahead import SPIN_MAX_NS, Gate
from slogate.scenarios.burstiness import Burstiness
from slogate.scenarios.model import Scenario
from slogate.scenarios.planner import Planner

PREPARE_SHARE_MAX = 0.5
SAMPLE = 32
BURST_MAX = 64  # the largest burst measured; a larger one is extrapolated
BURST_REPEATS = 3
# Sleeps of 10 to 60 ms, as a dispatcher's between a trace's instants: about
# 3.5 s. Sleeps of 1 to 4 ms woke sooner (p99 1.2 ms against 1.4 to 4.4 ms
# here: a core left idle longer is halted), and a check that sampled them
# predicted that a replay would hold where its lag p99 was 3 to 10 ms.
WAKES = 100
WAKE_SLEEP_S = (0.010, 0.060)
LEAD_MS = SPIN_MAX_NS / 1e6  # the look-ahead's lead before an instant (at most)
MEASURING_LEAD_NS = 20_000_000  # long enough for every send of a measured burst to reach its gate
MEASURING_MODEL = "measure"
# the exact-schedule server's answer while sends are measured: at once, one token
MEASURING_BEHAVIOUR = {"ttft_ms": 0.0, "itl_ms": 0.0, "output_tokens": 1}


@dataclass(frozen=True, slots=True)
class Costs:
    """This machine's costs for a scenario's requests: preparing one (a fixed
    part and a part per prompt token) and sending one of a burst (its write
    once the gate opened, ``send_us``, and what came before the gate,
    ``setup_us``); and how late it wakes a sleeping process (p99)."""

    prepare_ms: float
    prepare_us_per_token: float
    send_us: float
    sampled: int
    wake_ms: float = 0.0
    setup_us: float = 0.0


@dataclass(frozen=True, slots=True)
class Prediction:
    """Whether a replay at ``speed`` keeps its lag within ``bound_ms``, and why."""

    speed: float
    bound_ms: float
    prepare_share: float
    burst_lag_ms: float
    wake_ms: float
    holds: bool
    processes: int  # what the burst and the preparation need; 0: no number is enough
    max_speed: float | None

    def to_dict(self) -> dict[str, float | int | bool | None]:
        return {
            "speed": self.speed,
            "bound_ms": self.bound_ms,
            "prepare_share": round(self.prepare_share, 3),
            "burst_lag_ms": round(self.burst_lag_ms, 3),
            "wake_ms": round(self.wake_ms, 3),
            "holds": self.holds,
            "processes": self.processes,
            "max_speed": None if self.max_speed is None else round(self.max_speed, 2),
        }

    def line(self) -> str:
        why = (
            f"building prompts takes {self.prepare_share:.2f} of a core in the busiest second "
            f"(at most {PREPARE_SHARE_MAX:g}), the largest burst's last request leaves "
            f"{self.burst_lag_ms:.2f} ms after its instant, this machine wakes a process "
            f"{self.wake_ms:.2f} ms late (p99)"
        )
        if self.holds:
            return f"replay at speed {self.speed:g}: holds within {self.bound_ms:g} ms: {why}"
        if self.processes == 0:
            return (
                f"replay at speed {self.speed:g}: does not hold within {self.bound_ms:g} ms: "
                f"{why}; other work holds this machine's cores: no flag helps, give the load "
                "cores of its own"
            )
        advice = f"try --processes {self.processes}"
        if self.max_speed is not None:
            advice += f" or speedup {self.max_speed:.2g} or less"
        return (
            f"replay at speed {self.speed:g}: does not hold within {self.bound_ms:g} ms: {why}; "
            f"{advice}"
        )


def predict(burst: Burstiness, costs: Costs, bound_ms: float) -> Prediction:
    """The replay of a trace with ``burst``'s arrivals on a machine with ``costs``."""
    prepare_share = (
        burst.peak_arrivals_per_s * costs.prepare_ms / 1e3
        + burst.peak_prompt_tokens_per_s * costs.prepare_us_per_token / 1e6
    )
    burst_lag_ms = _burst_late_ms(burst.per_ms, costs)
    holds = prepare_share <= PREPARE_SHARE_MAX and burst_lag_ms <= bound_ms
    # each of N processes sends a shard of the burst; none small enough: no
    # number of processes helps (the line says so)
    shards = (
        n
        for n in range(1, burst.per_ms + 1)
        if _burst_late_ms(math.ceil(burst.per_ms / n), costs) <= bound_ms
    )
    bursts = next(shards, 0)
    processes = max(1, math.ceil(prepare_share / PREPARE_SHARE_MAX), bursts) if bursts else 0
    # a lower speed shrinks the preparation's share, never a burst
    slower = burst_lag_ms <= bound_ms and prepare_share > PREPARE_SHARE_MAX
    max_speed = burst.speed * PREPARE_SHARE_MAX / prepare_share if slower else None
    return Prediction(
        burst.speed,
        bound_ms,
        prepare_share,
        burst_lag_ms,
        costs.wake_ms,
        holds,
        processes,
        max_speed,
    )


def _burst_late_ms(size: int, costs: Costs) -> float:
    """How late the last of a burst of ``size`` leaves: the writes after its
    instant, later by what of the wake-up and the burst's set-up overran the lead."""
    overrun_ms = costs.wake_ms + size * costs.setup_us / 1e3 - LEAD_MS
    return size * costs.send_us / 1e3 + max(overrun_ms, 0.0)


def measure_costs(scenario: Scenario, url: str, burst: int) -> Costs:
    """Prepare the scenario's first ``SAMPLE`` arrivals and send bursts of
    ``burst`` of them (at most ``BURST_MAX``) to the server at ``url`` (the
    exact-schedule server: it answers at once)."""
    client = StreamClient(
        url, "chat", MEASURING_MODEL, scenario.request, scenario.timeouts, BURST_MAX
    )
    try:
        arrivals = Planner(scenario, scenario.seed).arrivals()
        prepared, tokens, spent_ms = [], [], []
        for _ in range(SAMPLE):
            started = time.perf_counter_ns()
            turn = next(arrivals, None)
            if turn is None:
                break
            prepared.append(client.prepare(turn))
            spent_ms.append((time.perf_counter_ns() - started) / 1e6)
            tokens.append(turn.intended_input_tokens)
        per_token_ms, fixed_ms = _fit(tokens, spent_ms)
        size = max(1, min(burst, BURST_MAX))
        bursts = [_burst_us(client, prepared, size) for _ in range(BURST_REPEATS)]
        setup_us, send_us = (statistics.median(part) for part in zip(*bursts, strict=True))
        return Costs(fixed_ms, per_token_ms * 1e3, send_us, len(prepared), _wake_ms(), setup_us)
    finally:
        client.close()


def _fit(tokens: list[int], spent_ms: list[float]) -> tuple[float, float]:
    """``spent = fixed + per_token * tokens``, robustly: the median cost per
    token, then the median of what is left per request (neither negative). A
    one-off (the prompt corpus grown for the first longer prompt, a collector
    pass) must not pass for every request's cost."""
    if not spent_ms:
        return 0.0, 0.0
    per_token = statistics.median(s / max(t, 1) for s, t in zip(spent_ms, tokens, strict=True))
    fixed = statistics.median(s - per_token * t for s, t in zip(spent_ms, tokens, strict=True))
    return per_token, max(fixed, 0.0)


def _burst_us(
    client: StreamClient, prepared: list[PreparedRequest], size: int
) -> tuple[float, float]:
    """A burst of ``size`` sends handed over ahead of its instant, connections
    opened ahead, as a run does: microseconds per request from the hand-over
    until the last waits at the gate, and from the instant until the last was
    written."""
    client.pool.open_ahead(size)
    handed = time.perf_counter_ns()
    due = handed + MEASURING_LEAD_NS
    gate = Gate(due, SPIN_MAX_NS)
    reached: list[int] = []

    def at_gate() -> bool:
        reached.append(time.perf_counter_ns())
        return gate.wait()

    requests = list(itertools.islice(itertools.cycle(prepared), size))
    sends = [gevent.spawn(client.send_prepared, p, due, None, at_gate) for p in requests]
    gevent.joinall(sends)
    written = [s.value.record.sent_ns for s in sends if s.value is not None]
    if len(written) < size or not all(written):
        raise RuntimeError("the measuring server did not take every request of the burst")
    if max(reached) >= due:
        raise RuntimeError(
            f"a burst of {size} sends took over {MEASURING_LEAD_NS / 1e6:g} ms to reach its "
            "instant: this machine is too busy to measure its costs"
        )
    return (max(reached) - handed) / size / 1e3, (max(written) - due) / size / 1e3


def wake_lateness_ms() -> Iterator[float]:
    """How late each of successive sleeps of ``WAKE_SLEEP_S`` woke (ms), without
    end: the wake-ups of a dispatcher between a trace's instants, here and in
    ``bench/`` beside a run."""
    rng = np.random.default_rng(0)
    while True:
        delay = float(rng.uniform(*WAKE_SLEEP_S))
        due = time.perf_counter_ns() + int(delay * 1e9)
        gevent.sleep(delay)
        yield (time.perf_counter_ns() - due) / 1e6


def _wake_ms() -> float:
    """The p99 of how late ``WAKES`` sleeps woke (ms)."""
    return float(np.percentile(list(itertools.islice(wake_lateness_ms(), WAKES)), 99))
