"""Offline simulation: run the scheduler on a virtual clock, no server, no sleeping.

This is how the calibration table is computed (and how capacity questions can
be answered in milliseconds): ``concurrency`` clients each send a request of
fixed input/output length (``ignore_eos``), and send the next one as soon as the
previous finishes (a closed loop, as benchmark tools run "concurrency N").
"""

from __future__ import annotations

import heapq
import itertools
import statistics
from dataclasses import dataclass

from slogate.simengine.profiles import Profile
from slogate.simengine.scheduler import Scheduler, Sequence, Step


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
    itl_p99_s: float  # gaps between a measured request's tokens: where prefill stalls show
    itl_max_s: float
    e2e_mean_s: float
    max_running: int
    preemptions: int


@dataclass
class _Pool:
    """One instance's scheduler and the step it is running (if any)."""

    scheduler: Scheduler
    step: Step | None = None
    ends_at: float = 0.0
    max_running: int = 0


def kv_transfer_seconds(profile: Profile, prompt_tokens: int) -> float:
    """Moving a prompt's KV cache from the prefill to the decode instance:
    its bytes over the ``tp`` GPUs' links at ``kv_transfer_gbps`` each."""
    link = profile.kv_transfer_gbps * 1e9 * profile.tp
    return profile.kv_cache_bytes(prompt_tokens) / link


def _first_token_time(seq: Sequence) -> float:
    assert seq.first_token_time is not None  # set with its first token, before it finished
    return seq.first_token_time


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
    latencies are those of the requests sent in that window.

    A ``disaggregated`` profile runs two instances of the deployment on their
    own clocks: the prefill instance computes the prompt and the first token
    (a request of one output token, as vLLM's disaggregated prefill does), the
    KV cache travels to the decode instance (:func:`kv_transfer_seconds`), which
    generates the rest. Prefill chunks then never stretch a decode step."""
    measured = requests if requests is not None else max(64, 3 * concurrency)
    total = concurrency + measured
    disaggregated = profile.disaggregated
    pools = [_Pool(Scheduler(profile)) for _ in range(2 if disaggregated else 1)]
    front_end_s = profile.efficiency.request_overhead_s
    arrivals: list[tuple[float, int, int, Sequence]] = []  # (ready, order, pool, sequence)
    order = itertools.count()
    now = 0.0
    issued = 0

    def issue() -> None:
        nonlocal issued
        first = 1 if disaggregated else output_tokens
        seq = Sequence(f"sim-{issued}", input_tokens, first, arrival=now)
        heapq.heappush(arrivals, (now + front_end_s, next(order), 0, seq))
        issued += 1

    def hand_over(prefilled: Sequence) -> None:
        """The decode instance's copy of a prefilled sequence, once its KV arrives."""
        seq = Sequence(prefilled.request_id, input_tokens, output_tokens, arrival=prefilled.arrival)
        seq.num_computed = input_tokens
        seq.output_len = 1
        seq.num_tokens = input_tokens + 1
        seq.first_token_time = seq.last_token_time = now
        ready = now + kv_transfer_seconds(profile, input_tokens)
        heapq.heappush(arrivals, (ready, next(order), 1, seq))

    def generated() -> int:
        return sum(pool.scheduler.generation_tokens for pool in pools)

    for _ in range(min(concurrency, total)):
        issue()

    done: list[Sequence] = []
    gaps: dict[str, list[float]] = {}  # request id -> its gaps between tokens
    window_start = window_end = 0.0
    tokens_at_start = tokens_at_end = 0
    while arrivals or any(pool.step or pool.scheduler.has_work() for pool in pools):
        for pool in pools:
            if pool.step is None and pool.scheduler.has_work():
                step = pool.scheduler.schedule()
                if not step.seqs:
                    raise RuntimeError(
                        f"{profile.name}: a request cannot be scheduled (KV cache too small)"
                    )
                pool.step, pool.ends_at = step, now + step.duration
                pool.max_running = max(pool.max_running, len(pool.scheduler.running))
        busy = [pool.ends_at for pool in pools if pool.step is not None]
        now = min(busy + ([arrivals[0][0]] if arrivals else []))
        while arrivals and arrivals[0][0] <= now:
            _, _, target, seq = heapq.heappop(arrivals)
            pools[target].scheduler.add(seq)
        for index, pool in enumerate(pools):
            if pool.step is None or pool.ends_at > now:
                continue
            decoding = {s.request_id: s.last_token_time for s in pool.step.seqs if s.output_len}
            emitted = pool.scheduler.complete(pool.step, now)
            pool.step = None
            for seq in emitted:
                if seq.request_id in decoding:
                    gaps.setdefault(seq.request_id, []).append(now - decoding[seq.request_id])
                if not seq.finished:
                    continue
                if disaggregated and index == 0:
                    hand_over(seq)
                    continue
                done.append(seq)
                if len(done) == concurrency:
                    window_start, tokens_at_start = now, generated()
                if issued < total:
                    issue()
                    if issued == total:
                        window_end, tokens_at_end = now, generated()

    if window_end <= window_start:
        raise ValueError("requests must exceed concurrency for a measurement window")
    measured_seqs = [s for s in done if window_start <= s.arrival <= window_end]
    duration = window_end - window_start
    ttfts = [_first_token_time(s) - s.arrival for s in measured_seqs]
    tpots = [
        (s.last_token_time - _first_token_time(s)) / (s.output_len - 1)
        for s in measured_seqs
        if s.output_len > 1
    ]
    itls = sorted(g for s in measured_seqs for g in gaps.get(s.request_id, ()))
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
        itl_p99_s=itls[min(len(itls) - 1, int(0.99 * len(itls)))] if itls else 0.0,
        itl_max_s=itls[-1] if itls else 0.0,
        e2e_mean_s=statistics.fmean(s.last_token_time - s.arrival for s in measured_seqs),
        max_running=pools[-1].max_running,
        preemptions=sum(pool.scheduler.num_preemptions for pool in pools),
    )
