"""The engine loop: runs the scheduler's steps in real time on the event loop.

Each iteration schedules a step, sleeps until the step's modelled end (scaled
by ``speedup``), applies it and wakes the requests that got tokens. Deadlines
follow a model clock anchored to the wall clock, not "now + duration", so
event-loop jitter does not accumulate: a late step is followed by a shorter
sleep. How late each step wakes up (its *lateness*) is recorded: it is the
measure of whether the simulation keeps real time (``bench/bench_simengine.py``).

Requests meet the loop through :class:`TokenStream`: after a step the loop
calls ``on_tokens()`` of every sequence that got a token, synchronously. The
base class resolves a waiting handler's future once the sequence has the
tokens it waits for (non-streaming replies wait for the end); the SSE writer
(``sse.SseStream``) overrides it to write the chunk to the socket right there,
so a streamed token costs no task switch.

With ``manage_gc`` (the server process does it) the loop also owns Python's
full garbage collections: with a thousand live streams one takes tens of
milliseconds, far longer than the 2 ms a step may be late. Start-up objects are
frozen out of the collector, automatic collections stay young-generation only,
and the loop runs a full one when it goes idle or, under constant load, once
every ``FULL_GC_INTERVAL_S``.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
from collections import deque
from typing import Any

from slogate.simengine.adapters import AdapterCost
from slogate.simengine.config import EngineConfig
from slogate.simengine.grammar import MASK_S
from slogate.simengine.profiles import ProfileError
from slogate.simengine.prometheus import EngineMetrics
from slogate.simengine.scheduler import Scheduler, Sequence, Status

FULL_GC_INTERVAL_S = 60.0
FINE_SLEEP_S = 0.001  # the last part of a step's wait, slept precisely


class TokenStream:
    """One request's link between its handler and the engine loop.

    ``writes_first_token``: the stream sends each token as it comes, so the
    request's TTFT ends when its first token's bytes are written (the stream
    calls :meth:`Engine.first_token_written`), not when the step that made it
    ended: under load, writing the other streams' tokens of the same step, or
    a step that woke late, comes between the two. A whole reply has no such
    instant; its TTFT ends with the step."""

    writes_first_token = False

    __slots__ = ("adapter", "last_time", "seq", "waiter", "want")

    def __init__(self, seq: Sequence) -> None:
        self.seq = seq
        self.adapter: str | None = None  # the LoRA adapter the request names, if any
        self.want = 1
        self.waiter: asyncio.Future[None] | None = None
        self.last_time = 0.0  # model time of the last token (for ITL metrics)
        seq.sink = self

    async def wait(self, want: int) -> None:
        """Return once the sequence has ``want`` output tokens or is done."""
        seq = self.seq
        if seq.output_len >= want or seq.status >= Status.FINISHED:
            return
        self.want = want
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def on_tokens(self) -> None:
        """Called by the engine loop when the sequence got a token (or finished)."""
        waiter = self.waiter
        seq = self.seq
        if (
            waiter is not None
            and (seq.output_len >= self.want or seq.finished)
            and not waiter.done()
        ):
            waiter.set_result(None)


class Engine:
    """A scheduler driven by the wall clock, with its metrics and timing stats."""

    def __init__(self, config: EngineConfig, *, manage_gc: bool = False) -> None:
        if config.profile.disaggregated:
            raise ProfileError(
                f"{config.profile.name}: disaggregated prefill/decode runs in the offline "
                "simulator (slogate.simengine.simulate); the live engine serves one instance"
            )
        self.config = config
        self.manage_gc = manage_gc
        self._last_full_gc = time.monotonic()
        self.scheduler = Scheduler(config.profile, seed=config.seed)
        self._adapters = AdapterCost(config.profile) if config.profile.lora_adapters else None
        self.metrics = EngineMetrics(self.scheduler, config.model_name)
        self._speedup = config.speedup
        self._anchor_real = time.monotonic()
        self._anchor_model = 0.0
        self._model_now = 0.0  # model time at the end of the last scheduled step
        self.busy_model_s = 0.0  # model time spent in steps: the GPUs' busy time
        self._work = asyncio.Event()
        self._in_front_end: set[Sequence] = set()
        self._constrained: set[Sequence] = set()  # structured outputs: masked every step
        self._task: asyncio.Task[None] | None = None
        self._lateness: deque[float] = deque(maxlen=1 << 16)
        self._stats_since = (time.monotonic(), time.process_time(), 0, 0)

    # -- clock ------------------------------------------------------------------------
    def model_time(self, at: float | None = None) -> float:
        """The model clock (seconds since start at ``speedup``) at the
        ``time.monotonic()`` instant ``at``, by default now."""
        real = time.monotonic() if at is None else at
        return self._anchor_model + (real - self._anchor_real) * self._speedup

    def _real_time(self, model: float) -> float:
        return self._anchor_real + (model - self._anchor_model) / self._speedup

    # -- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        if self.manage_gc:
            gc.collect()
            gc.freeze()  # start-up objects (modules, prose, tokenizer) are never rescanned
            young, middle, _ = gc.get_threshold()
            gc.set_threshold(young, middle, 1 << 30)  # full collections: ours only
        self._anchor_real = time.monotonic()
        self._anchor_model = self._model_now
        self._task = asyncio.get_running_loop().create_task(self._run(), name="simengine-steps")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    # -- requests ---------------------------------------------------------------------
    def submit(self, seq: Sequence, received: float | None = None) -> None:
        """Accept a request received at model time ``received`` (default now);
        it reaches the scheduler once the profile's front-end cost (HTTP
        parsing, tokenizing) has passed since then. The simulator's own
        parsing and tokenizing, already spent, counts toward that cost rather
        than on top of it, so TTFT runs from the request's receipt as a
        client sees it."""
        now = self.model_time()
        seq.arrival = now if received is None else min(received, now)
        overhead = self.config.profile.efficiency.request_overhead_s
        delay = (seq.arrival + overhead - now) / self._speedup
        if delay > 0:
            self._in_front_end.add(seq)
            asyncio.get_running_loop().call_later(delay, self._schedule, seq)
        else:
            self._schedule(seq)

    def constrain(self, seq: Sequence) -> None:
        """``seq`` decodes under a grammar: each of its steps computes its
        token mask (``simengine/grammar.py``), until it ends or is aborted."""
        self._constrained.add(seq)

    def _schedule(self, seq: Sequence) -> None:
        if seq.status == Status.ABORTED:  # the client left while in the front end
            return
        self._in_front_end.discard(seq)
        seq.queued_at = self.model_time()
        self.scheduler.add(seq)
        self._work.set()

    def first_token_written(self, seq: Sequence) -> None:
        """``seq``'s first token is on the wire: its TTFT ends now."""
        self.metrics.ttft.observe(self.model_time() - seq.arrival)

    def abort(self, seq: Sequence) -> None:
        self._constrained.discard(seq)
        if seq in self._in_front_end:
            self._in_front_end.discard(seq)
            seq.status = Status.ABORTED
            self.metrics.finished["abort"] += 1
        elif not seq.finished:
            self.scheduler.abort(seq)
            self.metrics.finished["abort"] += 1

    # -- the loop ---------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        scheduler = self.scheduler
        prev_end = self._model_now
        while True:
            if not scheduler.has_work():
                self._full_gc(idle=True)
                self._work.clear()
                await self._work.wait()
                self._model_now = max(self._model_now, self.model_time())
            step = scheduler.schedule()
            self._model_now += step.duration
            self.busy_model_s += step.duration
            if self._adapters is not None:
                self._model_now += self._adapters.seconds(step.seqs)
            if self._constrained:
                self._model_now += MASK_S * len(self._constrained.intersection(step.seqs))
            deadline = self._real_time(self._model_now)
            await self._sleep_until(loop, deadline)
            late = loop.time() - deadline
            self._lateness.append(late)
            if late > self.config.max_lateness_s:
                self._anchor_real, self._anchor_model = loop.time(), self._model_now
            now = self._model_now
            self._deliver(scheduler.complete(step, now), now, prev_end)
            prev_end = now
            self._full_gc(idle=False)

    @staticmethod
    async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        """Sleep until ``deadline`` (loop clock) with sub-millisecond precision.

        The event loop's timers wake up to 1 ms late (epoll counts whole
        milliseconds), so it is asked to wake ``FINE_SLEEP_S`` early and the
        rest is slept in one ``time.sleep``; the loop is blocked for at most
        that long per step, while nothing is due anyway."""
        delay = deadline - loop.time()
        # Always yield once, even when the step is short or already late, so
        # requests are accepted and answered between steps.
        await asyncio.sleep(max(0.0, delay - FINE_SLEEP_S))
        delay = deadline - loop.time()
        if delay > 0:
            time.sleep(delay)

    def _full_gc(self, idle: bool) -> None:
        """A full collection when idle, or when one is overdue under load."""
        if not self.manage_gc:
            return
        elapsed = time.monotonic() - self._last_full_gc
        if elapsed > FULL_GC_INTERVAL_S or (idle and elapsed > 1.0):
            gc.collect()
            self._last_full_gc = time.monotonic()

    def _deliver(self, emitted: list[Sequence], now: float, prev_end: float) -> None:
        """Record token metrics and hand the tokens to the requests' streams."""
        metrics = self.metrics
        same_gap = 0
        for seq in emitted:
            stream: TokenStream = seq.sink
            if seq.output_len == 1:
                if not stream.writes_first_token:
                    metrics.ttft.observe(now - seq.arrival)
            elif stream.last_time == prev_end:
                same_gap += 1
            else:
                metrics.itl.observe(now - stream.last_time)
            stream.last_time = now
            if seq.output_len == 1 and seq.scheduled_at is not None:
                metrics.prefill.observe(now - seq.scheduled_at)
            if seq.status == Status.FINISHED:
                metrics.decode.observe(now - (seq.first_token_time or now))
                metrics.e2e.observe(now - seq.arrival)
                metrics.finished["stop" if seq.stops_at_eos else "length"] += 1
            stream.on_tokens()
        if same_gap:
            metrics.itl.observe(now - prev_end, same_gap)

    # -- stats --------------------------------------------------------------------------
    def stats(self, reset: bool = False) -> dict[str, Any]:
        """Timing and occupancy since start or the last reset (``/admin/stats``)."""
        wall0, cpu0, steps0, tokens0 = self._stats_since
        wall, cpu = time.monotonic(), time.process_time()
        late = sorted(self._lateness)

        def pct(q: float) -> float:
            return late[min(len(late) - 1, int(q * len(late)))] * 1e3 if late else 0.0

        scheduler = self.scheduler
        result = {
            "steps": scheduler.num_steps - steps0,
            "wall_s": wall - wall0,
            "cpu_s": cpu - cpu0,
            "cpu_cores": (cpu - cpu0) / max(wall - wall0, 1e-9),
            "step_lateness_ms": {
                "count": len(late),
                "p50": pct(0.5),
                "p90": pct(0.9),
                "p99": pct(0.99),
                "max": late[-1] * 1e3 if late else 0.0,
                "mean": statistics.fmean(late) * 1e3 if late else 0.0,
            },
            "running": len(scheduler.running),
            "waiting": len(scheduler.waiting),
            "kv_usage": scheduler.kv.usage,
            "kv_peak_blocks": scheduler.kv.peak_used,
            "kv_peak_bytes": scheduler.kv.peak_used
            * scheduler.profile.block_size
            * scheduler.profile.kv_bytes_per_token,
            "preemptions": scheduler.num_preemptions,
            "generation_tokens": scheduler.generation_tokens - tokens0,
            "profile": scheduler.profile.describe(),
            "speedup": self._speedup,
        }
        if reset:
            self._lateness.clear()
            self._stats_since = (wall, cpu, scheduler.num_steps, scheduler.generation_tokens)
            scheduler.kv.peak_used = scheduler.kv.num_used
        return result
