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
machine wakes a sleeping process (``WAKES`` sleeps of 10 to 60 ms, each one's
lateness): a dispatcher sleeps until each instant's lead, and on a machine
whose cores other work holds, the wake-up is late whatever slogate does.

The prediction (:func:`predict`) puts those costs to the trace at the
chosen speed. The look-ahead's share of a core in the trace's busiest second
must stay within ``PREPARE_SHARE_MAX`` (the rest reads the streams). And the
replay's lag p99 must stay within the bound: each arrival's lag is worked
out as the dispatcher would send it (:func:`replay_lags_ms`), with its own
rules for groups, leads and wake-up margins, and the measured wake-ups drawn
at random; of ``REPLAYS`` such replays, the p99 nine in ten stay within
(:func:`likely_lag_ms`). So it weighs what a p99 weighs: how many requests each lateness
reaches. A burst after a long quiet is handed over early enough for most
wake-ups, but its last requests leave after the writes of all before it, and
one burst late is 16 requests; a single due a few milliseconds after another
has only a tenth of that gap to spare. ``--processes N`` divides the preparation
and the trace (each process sends every Nth arrival, its shard of every
burst); a lower speed divides only the first: a burst stays a burst at any
speed. Neither makes the machine wake sooner.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import gevent
import numpy as np

from slogate.client.streaming import PreparedRequest, StreamClient
from slogate.locustfiles.lookahead import (
    SPIN_MAX_NS,
    SPIN_SHARE,
    Gate,
    WakeMargin,
    joins_group,
    lead_ns,
)
from slogate.scenarios.burstiness import Burstiness
from slogate.scenarios.metrics import ITL, TTFT
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
REPLAYS = 20  # simulated replays of the trace, each with its own draws of the wake-ups
LIKELY = 90  # the percentile of their lag p99 (and max) the prediction takes
SIMULATED_MAX = 20_000  # arrivals simulated: the first ones of a longer trace
MEASURING_LEAD_NS = 20_000_000  # long enough for every send of a measured burst to reach its gate
MEASURING_MODEL = "measure"
# the exact-schedule server's answer while sends are measured: at once, one token
MEASURING_BEHAVIOUR = {TTFT.key: 0.0, ITL.key: 0.0, "output_tokens": 1}


@dataclass(frozen=True, slots=True)
class Costs:
    """This machine's costs for a scenario's requests: preparing one (a fixed
    part and a part per prompt token) and sending one of a burst (its write
    once the gate opened, ``send_us``, and what came before the gate,
    ``setup_us``); and how late each of a sample of sleeps woke (``wakes_ms``)."""

    prepare_ms: float
    prepare_us_per_token: float
    send_us: float
    sampled: int
    setup_us: float = 0.0
    wakes_ms: tuple[float, ...] = field(default=())

    @property
    def wake_ms(self) -> float:
        """How late a sleeping process wakes here, p99 (ms)."""
        return float(np.percentile(self.wakes_ms, 99)) if self.wakes_ms else 0.0

    def to_dict(self) -> dict[str, float | int]:
        """For ``--json``: the wake-ups as their p99."""
        return {
            "prepare_ms": round(self.prepare_ms, 3),
            "prepare_us_per_token": round(self.prepare_us_per_token, 3),
            "send_us": round(self.send_us, 3),
            "setup_us": round(self.setup_us, 3),
            "sampled": self.sampled,
            "wake_ms": round(self.wake_ms, 3),
        }


@dataclass(frozen=True, slots=True)
class Prediction:
    """Whether a replay at ``speed`` keeps its lag p99 within ``bound_ms``, and why."""

    speed: float
    bound_ms: float
    prepare_share: float
    lag_p99_ms: float
    lag_max_ms: float
    wake_ms: float
    holds: bool
    processes: int  # what the trace and the preparation need; 0: no number is enough
    max_speed: float | None

    def to_dict(self) -> dict[str, float | int | bool | None]:
        return {
            "speed": self.speed,
            "bound_ms": self.bound_ms,
            "prepare_share": round(self.prepare_share, 3),
            "lag_p99_ms": round(self.lag_p99_ms, 3),
            "lag_max_ms": round(self.lag_max_ms, 3),
            "wake_ms": round(self.wake_ms, 3),
            "holds": self.holds,
            "processes": self.processes,
            "max_speed": None if self.max_speed is None else round(self.max_speed, 2),
        }

    def line(self) -> str:
        why = (
            f"building prompts takes {self.prepare_share:.2f} of a core in the busiest second "
            f"(at most {PREPARE_SHARE_MAX:g}), nine replays in ten as the dispatcher sends "
            f"them here stay within lag p99 {self.lag_p99_ms:.2f} ms and max "
            f"{self.lag_max_ms:.2f} ms, this machine wakes a process {self.wake_ms:.2f} ms "
            "late (p99)"
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


def predict(burst: Burstiness, times_s: np.ndarray, costs: Costs, bound_ms: float) -> Prediction:
    """The replay of a trace (its arrivals ``times_s`` as recorded, ``burst``
    at the chosen speed) on a machine with ``costs``."""
    prepare_share = (
        burst.peak_arrivals_per_s * costs.prepare_ms / 1e3
        + burst.peak_prompt_tokens_per_s * costs.prepare_us_per_token / 1e6
    )
    at_speed = np.asarray(times_s[:SIMULATED_MAX], dtype=np.float64) / burst.speed
    lag_p99, lag_max = likely_lag_ms(at_speed, costs)
    holds = prepare_share <= PREPARE_SHARE_MAX and lag_p99 <= bound_ms
    # each of N processes sends every Nth arrival (its shard of every burst, and
    # gaps N times as long); none enough: no number of processes helps (the line
    # says so)
    shards = (
        n
        for n in range(2, max(burst.per_ms, 1) + 1)
        if likely_lag_ms(at_speed[::n], costs)[0] <= bound_ms
    )
    sending = 1 if lag_p99 <= bound_ms else next(shards, 0)
    processes = max(math.ceil(prepare_share / PREPARE_SHARE_MAX), sending) if sending else 0
    # a lower speed shrinks the preparation's share, never a burst
    slower = lag_p99 <= bound_ms and prepare_share > PREPARE_SHARE_MAX
    max_speed = burst.speed * PREPARE_SHARE_MAX / prepare_share if slower else None
    return Prediction(
        burst.speed,
        bound_ms,
        prepare_share,
        lag_p99,
        lag_max,
        costs.wake_ms,
        holds,
        processes,
        max_speed,
    )


def likely_lag_ms(times_s: np.ndarray, costs: Costs) -> tuple[float, float]:
    """The lag p99 and max that nine replays in ten stay within (``REPLAYS`` of
    them, each drawing its own wake-ups): one replay's draws can miss the
    sample's rare late wake-up, and one late burst is most of a p99."""
    replays = [replay_lags_ms(times_s, costs, seed) for seed in range(REPLAYS)]
    p99s = [float(np.percentile(lags, 99)) if len(lags) else 0.0 for lags in replays]
    maxima = [float(lags.max(initial=0.0)) for lags in replays]
    return float(np.percentile(p99s, LIKELY)), float(np.percentile(maxima, LIKELY))


def replay_lags_ms(times_s: np.ndarray, costs: Costs, seed: int = 0) -> np.ndarray:
    """Each arrival's lag (ms) as the look-ahead's dispatcher would send the
    trace (``times_s``, sorted, at the speed replayed) on a machine with
    ``costs``, its preparation done ahead: the instants close after a group's
    first are handed over with it, a lead ahead of it, by a dispatcher that
    slept until its wake-up margin before the lead and woke as late as one of
    the measured wake-ups, drawn at random (none while the sends before it
    still ran). Each request of the group is set up before the gates, then
    each writes at its instant, in turn; its lag ends with its write."""
    due: list[int] = np.round(np.asarray(times_s, dtype=np.float64) * 1e9).astype(np.int64).tolist()
    wakes = np.asarray(costs.wakes_ms or (0.0,), dtype=np.float64) * 1e6
    late: list[int] = (
        np.random.default_rng(seed).choice(wakes, size=len(due)).astype(np.int64).tolist()
    )
    setup_ns, send_ns = round(costs.setup_us * 1e3), round(costs.send_us * 1e3)
    lags = np.zeros(len(due), dtype=np.float64)
    waking = WakeMargin()
    previous = (due[0] if due else 0) - SPIN_MAX_NS * SPIN_SHARE  # as the dispatcher's
    busy_until = previous  # the last write of the group before
    first = 0
    while first < len(due):
        group_ns = due[first]
        end = first + 1
        while end < len(due) and joins_group(due[end], group_ns):
            end += 1
        gap_ns = max(group_ns - previous, 0)
        lead = lead_ns(gap_ns)
        wake_at = group_ns - lead - waking.ns(gap_ns, lead)
        handed = max(group_ns - lead, busy_until)
        if busy_until < wake_at:  # it slept
            handed = max(handed, wake_at + late[first])
            waking.note(late[first])
        written = handed + (end - first) * setup_ns
        for k in range(first, end):
            written = max(written, due[k]) + send_ns
            lags[k] = (written - due[k]) / 1e6
        busy_until, previous, first = written, due[end - 1], end
    return lags


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
        wakes = tuple(itertools.islice(wake_lateness_ms(), WAKES))
        return Costs(fixed_ms, per_token_ms * 1e3, send_us, len(prepared), setup_us, wakes)
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
