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
    loop = _ClosedLoop(profile, concurrency, input_tokens, output_tokens, concurrency + measured)
    loop.run()
    return loop.result()


class _ClosedLoop:
    """One closed-loop simulation's state on its virtual clock: the pools, the
    requests on their way to a pool, and the measurement window."""

    def __init__(
        self, profile: Profile, concurrency: int, input_tokens: int, output_tokens: int, total: int
    ) -> None:
        self.profile = profile
        self.concurrency = concurrency
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.total = total
        self.disaggregated = profile.disaggregated
        self.pools = [_Pool(Scheduler(profile)) for _ in range(2 if self.disaggregated else 1)]
        self.arrivals: list[tuple[float, int, int, Sequence]] = []  # (ready, order, pool, seq)
        self.order = itertools.count()
        self.now = 0.0
        self.issued = 0
        self.done: list[Sequence] = []
        self.gaps: dict[str, list[float]] = {}  # request id -> its gaps between tokens
        self.window_start = self.window_end = 0.0
        self.tokens_at_start = self.tokens_at_end = 0

    def issue(self) -> None:
        first = 1 if self.disaggregated else self.output_tokens
        seq = Sequence(f"sim-{self.issued}", self.input_tokens, first, arrival=self.now)
        ready = self.now + self.profile.efficiency.request_overhead_s
        heapq.heappush(self.arrivals, (ready, next(self.order), 0, seq))
        self.issued += 1

    def hand_over(self, prefilled: Sequence) -> None:
        """The decode instance's copy of a prefilled sequence, once its KV arrives."""
        seq = Sequence(
            prefilled.request_id, self.input_tokens, self.output_tokens, arrival=prefilled.arrival
        )
        seq.num_computed = self.input_tokens
        seq.output_len = 1
        seq.num_tokens = self.input_tokens + 1
        seq.first_token_time = seq.last_token_time = self.now
        ready = self.now + kv_transfer_seconds(self.profile, self.input_tokens)
        heapq.heappush(self.arrivals, (ready, next(self.order), 1, seq))

    def generated(self) -> int:
        return sum(pool.scheduler.generation_tokens for pool in self.pools)

    def busy(self) -> bool:
        return bool(self.arrivals) or any(p.step or p.scheduler.has_work() for p in self.pools)

    def run(self) -> None:
        for _ in range(min(self.concurrency, self.total)):
            self.issue()
        while self.busy():
            self.start_steps()
            self.advance()
            for index, pool in enumerate(self.pools):
                if pool.step is not None and pool.ends_at <= self.now:
                    self.finish_step(index, pool, pool.step)

    def start_steps(self) -> None:
        """Each idle pool with work starts its next step."""
        for pool in self.pools:
            if pool.step is None and pool.scheduler.has_work():
                step = pool.scheduler.schedule()
                if not step.seqs:
                    raise RuntimeError(
                        f"{self.profile.name}: a request cannot be scheduled (KV cache too small)"
                    )
                pool.step, pool.ends_at = step, self.now + step.duration
                pool.max_running = max(pool.max_running, len(pool.scheduler.running))

    def advance(self) -> None:
        """The clock to the next step's end or arrival; what arrived joins its pool."""
        ends = [pool.ends_at for pool in self.pools if pool.step is not None]
        self.now = min(ends + ([self.arrivals[0][0]] if self.arrivals else []))
        while self.arrivals and self.arrivals[0][0] <= self.now:
            _, _, target, seq = heapq.heappop(self.arrivals)
            self.pools[target].scheduler.add(seq)

    def finish_step(self, index: int, pool: _Pool, step: Step) -> None:
        decoding = {s.request_id: s.last_token_time for s in step.seqs if s.output_len}
        emitted = pool.scheduler.complete(step, self.now)
        pool.step = None
        for seq in emitted:
            if seq.request_id in decoding:
                gap = self.now - decoding[seq.request_id]
                self.gaps.setdefault(seq.request_id, []).append(gap)
            if not seq.finished:
                continue
            if self.disaggregated and index == 0:
                self.hand_over(seq)
            else:
                self.finish(seq)

    def finish(self, seq: Sequence) -> None:
        """A finished request; its client sends the next, and the window opens
        after the warm-up wave and closes with the last request sent."""
        self.done.append(seq)
        if len(self.done) == self.concurrency:
            self.window_start, self.tokens_at_start = self.now, self.generated()
        if self.issued < self.total:
            self.issue()
            if self.issued == self.total:
                self.window_end, self.tokens_at_end = self.now, self.generated()

    def result(self) -> SimResult:
        if self.window_end <= self.window_start:
            raise ValueError("requests must exceed concurrency for a measurement window")
        measured = [s for s in self.done if self.window_start <= s.arrival <= self.window_end]
        duration = self.window_end - self.window_start
        ttfts = [_first_token_time(s) - s.arrival for s in measured]
        tpots = [
            (s.last_token_time - _first_token_time(s)) / (s.output_len - 1)
            for s in measured
            if s.output_len > 1
        ]
        itls = sorted(g for s in measured for g in self.gaps.get(s.request_id, ()))
        return SimResult(
            concurrency=self.concurrency,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            requests=len(measured),
            duration_s=duration,
            output_tokens_per_s=(self.tokens_at_end - self.tokens_at_start) / duration,
            requests_per_s=len(measured) / duration,
            ttft_mean_s=statistics.fmean(ttfts),
            ttft_p50_s=statistics.median(ttfts),
            tpot_mean_s=statistics.fmean(tpots) if tpots else 0.0,
            itl_p99_s=itls[min(len(itls) - 1, int(0.99 * len(itls)))] if itls else 0.0,
            itl_max_s=itls[-1] if itls else 0.0,
            e2e_mean_s=statistics.fmean(s.last_token_time - s.arrival for s in measured),
            max_running=self.pools[-1].max_running,
            preemptions=sum(pool.scheduler.num_preemptions for pool in self.pools),
        )
