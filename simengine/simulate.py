"""Offline simulation: run the scheduler on a virtual clock, no server, no sleeping.

This is how the calibration table is computed (and how capacity questions can
be answered in milliseconds): ``concurrency`` clients each send a request of
fixed input/output length (``ignore_eos``), and send the next one as soon as the
previous finishes (a closed loop, as benchmark tools run "concurrency N").
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass

from slogate.simengine.profiles import Profile
from slogate.simengine.scheduler import Scheduler, Sequence


@dataclass(frozen=True)
class SimResult:
    """Steady-state figures of a closed-loop run (times in seconds)."""

    concurrency: int
    input_tokens: int
    output_tokens: int
    requests: int  # requests measured (the warm-up wave excluded)
    duration_s: float  # the measurement window
    output_tokens_per_s: float
    requests_per_s: float
    ttft_mean_s: float
    ttft_p50_s: float
    tpot_mean_s: float  # per request (last - first token) / (output - 1), averaged
    e2e_mean_s: float
    max_running: int
    preemptions: int


def simulate_closed_loop(
    profile: Profile,
    *,
    concurrency: int,
    input_tokens: int,
    output_tokens: int,
    requests: int | None = None,
) -> SimResult:
    """Run ``requests`` measured requests (default: enough for three waves of
    ``concurrency``, at least 64) after a warm-up of ``concurrency`` requests.

    Throughput is measured from the warm-up wave's last completion to the
    moment the last request is sent, while every client is still busy, so
    neither the ramp-up nor the final drain (no more prefills) distorts it;
    latencies are those of the requests sent in that window."""
    measured = requests if requests is not None else max(64, 3 * concurrency)
    total = concurrency + measured
    scheduler = Scheduler(profile)
    front_end_s = profile.efficiency.request_overhead_s
    in_front_end: deque[Sequence] = deque()  # sent, not yet handed to the scheduler
    now = 0.0
    issued = 0

    def issue() -> None:
        nonlocal issued
        in_front_end.append(Sequence(f"sim-{issued}", input_tokens, output_tokens, arrival=now))
        issued += 1

    for _ in range(min(concurrency, total)):
        issue()

    done: list[Sequence] = []
    window_start = window_end = 0.0
    tokens_at_start = tokens_at_end = 0
    max_running = 0
    while scheduler.has_work() or in_front_end:
        # Requests reach the scheduler after the front end's cost (HTTP, tokenizing).
        if not scheduler.has_work():
            now = max(now, in_front_end[0].arrival + front_end_s)
        while in_front_end and in_front_end[0].arrival + front_end_s <= now:
            scheduler.add(in_front_end.popleft())
        step = scheduler.schedule()
        if not step.seqs:
            raise RuntimeError(
                f"{profile.name}: a request cannot be scheduled (KV cache too small)"
            )
        now += step.duration
        max_running = max(max_running, len(scheduler.running))
        for seq in scheduler.complete(step, now):
            if not seq.finished:
                continue
            done.append(seq)
            if len(done) == concurrency:
                window_start = now
                tokens_at_start = scheduler.generation_tokens
            if issued < total:
                issue()
                if issued == total:
                    window_end = now
                    tokens_at_end = scheduler.generation_tokens

    if window_end <= window_start:
        raise ValueError("requests must exceed concurrency for a measurement window")
    measured_seqs = [s for s in done if window_start <= s.arrival <= window_end]
    duration = window_end - window_start
    ttfts = [s.first_token_time - s.arrival for s in measured_seqs]
    tpots = [
        (s.last_token_time - s.first_token_time) / (s.output_len - 1)
        for s in measured_seqs
        if s.output_len > 1
    ]
    return SimResult(
        concurrency=concurrency,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        requests=len(measured_seqs),
        duration_s=duration,
        output_tokens_per_s=(tokens_at_end - tokens_at_start) / duration,
        requests_per_s=len(measured_seqs) / duration,
        ttft_mean_s=statistics.fmean(ttfts),
        ttft_p50_s=statistics.median(ttfts),
        tpot_mean_s=statistics.fmean(tpots) if tpots else 0.0,
        e2e_mean_s=statistics.fmean(s.last_token_time - s.arrival for s in measured_seqs),
        max_running=max_running,
        preemptions=scheduler.num_preemptions,
    )
