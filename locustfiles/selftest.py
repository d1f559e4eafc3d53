"""How far off is this machine's load generator? Measure it against the truth.

``run_selftest`` starts the exact-schedule server (:mod:`exactengine`) in its
own process, drives it with the real streaming client from gevent greenlets
(one closed-loop stream each, with full measurement: parse, record, HDR), and
compares the TTFT and ITL percentiles slogate reports with the ones computed
exactly from the server's log of when it received each request and really sent
each chunk. The difference is the generator's error bound at that load.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import gevent
import numpy as np
import psutil

from slogate.analysis.measurement.percentiles import estimate
from slogate.analysis.measurement.recorder import OVERALL, Recorder
from slogate.analysis.measurement.request_metrics import per_token_itl
from slogate.analysis.verdict.generator import (
    ProcessHealth,
    gc_block,
    held_block,
    held_line,
    stall_block,
)
from slogate.client.streaming import StreamClient
from slogate.engines.exact import ExactEngine
from slogate.exactengine.truth import TruthEntry
from slogate.locustfiles.loopwatch import LoopWatch, freeze_startup
from slogate.scenarios.metrics import ITL, TTFT
from slogate.scenarios.model import PlannedTurn, RequestOptions, Timeouts

SCENARIO = "selftest"
PERCENTILES = {"p50": 50.0, "p99": 99.0}
PROMPT = "Explain how a neural network learns. " * 4


@dataclass(frozen=True, slots=True)
class Comparison:
    """One reported percentile next to the truth, in milliseconds."""

    metric: str
    stat: str
    reported_ms: float
    truth_ms: float

    @property
    def error_ms(self) -> float:
        return self.reported_ms - self.truth_ms


@dataclass(frozen=True, slots=True)
class Setup:
    """The schedule the server kept and how the client timed it."""

    streams: int
    ttft_ms: float
    itl_ms: float
    tokens: int
    tokens_per_chunk: int
    kernel_timestamps: bool
    client_cpus: tuple[int, ...] = ()  # empty: not pinned
    server_cpus: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SelftestResult:
    """What one selftest measured; ``comparisons`` hold the error against the truth."""

    setup: Setup
    duration_s: float
    requests: int
    failed: int
    events: int
    events_per_s: float
    client_cpu_s: float
    server_cpu_s: float
    peak_rss_mb: float  # up to the end of the load, before the truth is fetched
    rss_start_mb: float  # after the warm-up
    rss_end_mb: float  # when the load ended: flat memory means close to the start
    tokens_exact: bool
    comparisons: list[Comparison] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    health: ProcessHealth = field(default_factory=ProcessHealth)

    @property
    def streams(self) -> int:
        return self.setup.streams

    @property
    def max_abs_error_ms(self) -> float:
        return max((abs(c.error_ms) for c in self.comparisons), default=float("nan"))

    @property
    def client_cores(self) -> float:
        return self.client_cpu_s / self.duration_s if self.duration_s else 0.0

    def to_dict(self) -> dict[str, Any]:
        setup = self.setup
        return {
            "streams": setup.streams,
            TTFT.key: setup.ttft_ms,
            ITL.key: setup.itl_ms,
            "tokens": setup.tokens,
            "tokens_per_chunk": setup.tokens_per_chunk,
            "kernel_timestamps": setup.kernel_timestamps,
            "client_cpus": list(setup.client_cpus),
            "server_cpus": list(setup.server_cpus),
            "duration_s": round(self.duration_s, 3),
            "requests": self.requests,
            "failed": self.failed,
            "errors": self.errors,
            "events": self.events,
            "events_per_s": round(self.events_per_s, 1),
            "client_cpu_s": round(self.client_cpu_s, 3),
            "client_cores": round(self.client_cores, 3),
            "server_cpu_s": round(self.server_cpu_s, 3),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "rss_start_mb": round(self.rss_start_mb, 1),
            "rss_end_mb": round(self.rss_end_mb, 1),
            "tokens_exact": self.tokens_exact,
            "max_abs_error_ms": round(self.max_abs_error_ms, 4),
            "loop_stall_ms": stall_block(self.health),
            "loop_held_ms": held_block(self.health),
            "gc": gc_block(self.health),
            "comparisons": [
                {
                    "metric": c.metric,
                    "stat": c.stat,
                    "reported_ms": round(c.reported_ms, 4),
                    "truth_ms": round(c.truth_ms, 4),
                    "error_ms": round(c.error_ms, 4),
                }
                for c in self.comparisons
            ],
        }

    def lines(self) -> list[str]:
        """A human summary, one fact per line."""
        setup = self.setup
        timing = "kernel receive timestamps" if setup.kernel_timestamps else "read-return times"
        out = [
            f"server schedule: TTFT {setup.ttft_ms:g} ms, ITL {setup.itl_ms:g} ms, "
            f"{setup.tokens} tokens, {setup.tokens_per_chunk} per chunk; client timing: {timing}"
            + _cores_text(setup),
            f"streams {self.streams}, {self.duration_s:.1f} s: {self.requests} requests "
            f"({self.failed} failed), {self.events} events, {self.events_per_s:,.0f} events/s",
            f"client CPU {self.client_cpu_s:.2f} s ({self.client_cores:.2f} cores), "
            f"server CPU {self.server_cpu_s:.2f} s, client RSS {self.rss_start_mb:.0f} MB after "
            f"warm-up, {self.rss_end_mb:.0f} MB at the end, peak {self.peak_rss_mb:.0f} MB",
        ]
        for c in self.comparisons:
            out.append(
                f"{c.metric} {c.stat}: reported {c.reported_ms:.3f} ms, truth {c.truth_ms:.3f} ms,"
                f" error {c.error_ms:+.3f} ms"
            )
        out.append(f"token counts exact: {'yes' if self.tokens_exact else 'NO'}")
        stall, pauses = stall_block(self.health), gc_block(self.health)
        if stall["samples"]:
            out.append(
                f"client loop stalls: p50 {stall['p50']:.3f} ms, p99 {stall['p99']:.3f} ms, "
                f"max {stall['max']:.3f} ms; collector: {pauses['collections']} passes "
                f"{pauses['by_generation']}, longest {pauses['max_pause_ms']:.3f} ms"
            )
        if self.health.held_split and self.health.held_ns:
            out.append(
                f"client loop held {self.health.held_ns / 1e6:.1f} ms: {held_line(self.health)}"
            )
        return out


def _cores_text(setup: Setup) -> str:
    if not setup.server_cpus:
        return ""
    client = ",".join(map(str, setup.client_cpus)) or "any"
    return f"; server on CPU {','.join(map(str, setup.server_cpus))}, client on CPU {client}"


def split_cores() -> tuple[set[int], set[int]]:
    """(client's, server's) cores: the server gets the last core this process may
    use, the client the rest; both empty with fewer than two cores."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) < 2:
        return set(), set()
    return set(cores[:-1]), {cores[-1]}


@contextlib.contextmanager
def pinned(cpus: set[int]) -> Iterator[None]:
    """This process on ``cpus`` for the block (unchanged when empty)."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def value_at_percentile(values: np.ndarray, percentile: float) -> float:
    """The sample at the rank HDR histograms use: round(p/100 * n), at least 1."""
    rank = max(int(percentile / 100.0 * len(values) + 0.5), 1)
    return float(np.partition(values, rank - 1)[rank - 1])


def truth_samples(entries: list[TruthEntry]) -> tuple[np.ndarray, np.ndarray]:
    """Exact TTFT and per-token ITL samples (ns) of the requests the server finished."""
    ttft: list[int] = []
    itl: list[float] = []
    for entry in entries:
        if entry.outcome != "done" or not entry.chunk_ns:
            continue
        ttft.append(entry.chunk_ns[0] - entry.received_ns)
        for gap, tokens in per_token_itl(list(entry.chunk_ns), list(entry.chunk_tokens)):
            itl.extend([gap] * tokens)
    return np.asarray(ttft, dtype=np.float64), np.asarray(itl, dtype=np.float64)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def run_selftest(
    streams: int,
    duration_s: float,
    ttft_ms: float = 50.0,
    itl_ms: float = 20.0,
    tokens: int = 128,
    tokens_per_chunk: int = 1,
    kernel_timestamps: bool = True,
    separate_cores: bool = True,
) -> SelftestResult:
    """Drive ``streams`` closed-loop streams against the exact-schedule server for
    ``duration_s`` (in-flight streams then finish) and compare TTFT and ITL
    p50/p99 with the truth.

    With ``separate_cores`` (and two cores or more) the server runs on a core of
    its own and the client on the others: in a real run the engine is another
    machine, so the server's CPU is not the generator's error to measure. A
    caller that places both itself passes False."""
    if streams < 1 or duration_s <= 0 or tokens < 2:
        raise ValueError("selftest: streams >= 1, duration_s > 0 and tokens >= 2 are required")
    _raise_fd_limit(2 * streams + 256)
    client_cpus, server_cpus = split_cores() if separate_cores else (set(), set())
    with pinned(client_cpus):
        result = _measure(streams, duration_s, ttft_ms, itl_ms, tokens, tokens_per_chunk,
                          kernel_timestamps, server_cpus)  # fmt: skip
    setup = replace(result.setup, client_cpus=tuple(sorted(client_cpus)),
                    server_cpus=tuple(sorted(server_cpus)))  # fmt: skip
    return replace(result, setup=setup)


def _measure(
    streams: int,
    duration_s: float,
    ttft_ms: float,
    itl_ms: float,
    tokens: int,
    tokens_per_chunk: int,
    kernel_timestamps: bool,
    server_cpus: set[int],
) -> SelftestResult:
    behaviour = {TTFT.key: ttft_ms, ITL.key: itl_ms, "tokens_per_chunk": tokens_per_chunk}
    with ExactEngine(behaviour, cpus=server_cpus or None) as engine:
        server = psutil.Process(engine.pid)
        client = StreamClient(
            engine.url,
            "chat",
            engine.model,
            RequestOptions(),
            Timeouts(connect_s=30.0, first_token_s=60.0, stall_s=60.0),
            concurrency=streams,
            kernel_timestamps=kernel_timestamps,
        )
        turn = PlannedTurn(SCENARIO, 0, 0, PROMPT, tokens, len(PROMPT.split()), tokens)
        recorder = Recorder()
        _warm_up(client, streams, turn)
        engine.truth()  # forget the warm-up requests
        freeze_startup()  # as a load process does before its users start
        watch = LoopWatch()
        server_cpu_before = sum(server.cpu_times()[:2])
        rss_start = _rss_mb()
        cpu_before = _cpu_s()
        watch.start()
        spread_s = (ttft_ms + (tokens - 1) * itl_ms) / 1000.0
        events, wall_s, counts = _drive(client, recorder, streams, duration_s, spread_s, turn)
        watch.stop()
        client_cpu = _cpu_s() - cpu_before
        memory = (_peak_rss_mb(), rss_start, _rss_mb())
        server_cpu = sum(server.cpu_times()[:2]) - server_cpu_before
        client.close()
        truth = engine.truth()
    setup = Setup(streams, ttft_ms, itl_ms, tokens, tokens_per_chunk, client.kernel_timestamps)
    result = _result(setup, wall_s, events, client_cpu, server_cpu, memory, recorder, truth, counts)
    return replace(result, health=watch.health())


def _warm_up(client: StreamClient, streams: int, turn: PlannedTurn) -> None:
    """Open every stream's connection with one short request, unrecorded: a
    connection's setup is the network's cost, not a measurement error."""
    short = replace(turn, max_tokens=2, intended_output_tokens=2)
    gevent.joinall([gevent.spawn(client.send, short) for _ in range(streams)], raise_error=True)


def _drive(
    client: StreamClient,
    recorder: Recorder,
    streams: int,
    duration_s: float,
    spread_s: float,
    turn: PlannedTurn,
) -> tuple[int, float, list[int]]:
    """Closed loop: each greenlet sends again as soon as its stream ends, until the
    duration is over (streams in flight then finish). Starts are spread evenly
    over ``spread_s``, one request's length on the server's schedule: every
    request lasts as long, so streams started within one ITL would end and
    send again together every cycle, hundreds of sends and records in a burst
    that holds the loop for tens of milliseconds; real traffic, of mixed
    lengths, sends at a steady rate. Returns (events, wall seconds, the usage
    output-token count of every successful request)."""
    deadline = time.perf_counter() + duration_s
    counts: list[int] = []
    events = 0

    def stream(index: int) -> None:
        nonlocal events
        gevent.sleep(index * spread_s / streams)
        while time.perf_counter() < deadline:
            record = client.send(turn).record
            events += len(record.chunk_ns)
            if record.ok:
                counts.append(record.output_tokens if record.output_tokens is not None else -1)
            recorder.record(record, time.time())

    started = time.perf_counter()
    gevent.joinall([gevent.spawn(stream, i) for i in range(streams)], raise_error=True)
    return events, time.perf_counter() - started, counts


def _result(
    setup: Setup,
    wall_s: float,
    events: int,
    client_cpu: float,
    server_cpu: float,
    memory: tuple[float, float, float],
    recorder: Recorder,
    truth: list[TruthEntry],
    counts: list[int],
) -> SelftestResult:
    bucket = recorder.bucket(SCENARIO, OVERALL)
    truth_ttft, truth_itl = truth_samples(truth)
    comparisons = []
    for metric, samples in ((TTFT.name, truth_ttft), (ITL.name, truth_itl)):
        if metric not in bucket.histograms or not len(samples):
            continue
        histogram = bucket.histograms.histogram(metric)
        for stat, percentile in PERCENTILES.items():
            reported_us = estimate(histogram, percentile).value
            comparisons.append(
                Comparison(
                    metric,
                    stat,
                    reported_us / 1000.0,
                    value_at_percentile(samples, percentile) / 1e6,
                )
            )
    served = sorted(e.output_tokens for e in truth if e.outcome == "done")
    counters = bucket.counters
    return SelftestResult(
        setup=setup,
        duration_s=wall_s,
        requests=counters.total,
        failed=counters.failed,
        events=events,
        events_per_s=events / wall_s if wall_s else 0.0,
        client_cpu_s=client_cpu,
        server_cpu_s=server_cpu,
        peak_rss_mb=memory[0],
        rss_start_mb=memory[1],
        rss_end_mb=memory[2],
        tokens_exact=sorted(counts) == served,
        comparisons=comparisons,
        errors=dict(counters.errors),
    )
