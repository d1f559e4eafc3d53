"""Continuous batching as vLLM (v1) and TensorRT-LLM do it, in discrete steps,
without a clock.

Every step the scheduler fills a token budget (``max_num_batched_tokens``):
first the running sequences, one token each when decoding or a chunk of the
rest of their prompt (chunked prefill), then waiting sequences in arrival order
while the budget, ``max_num_seqs`` and free KV blocks allow. Tokens computed in
a step appear when it ends.

The profile's engine family decides admission (``profiles.ENGINE_FAMILIES``):

- vLLM admits a sequence when its first chunk's blocks are free. A running
  sequence that needs a block when none is free preempts the most recently
  admitted one, which loses its KV cache and goes back to the head of the queue
  to recompute its prompt and output so far.
- TensorRT-LLM (``GUARANTEED_NO_EVICT``) admits a sequence only when the blocks
  of its whole prompt plus ``max_output`` are free and reserves them at once, so
  a running sequence never runs out and nothing is preempted; the price is
  fewer sequences in flight while their outputs are still short. Its prefill
  is not chunked: a prompt joins a step only if all of it fits in the budget
  left (one longer than the whole budget runs in a step with no other prompt).

The scheduling policy (the profile's ``scheduling_policy``, vLLM's
``--scheduling-policy``) orders the waiting queue. ``fcfs``: by arrival, a
request's ``priority`` ignored. ``priority`` (vLLM v1's
``PriorityRequestQueue``): by ``(priority, arrival, request id)``, lower
first; a preempted sequence rejoins the queue at its rank, not the head, and
the victim of a preemption is the running sequence last in
``(priority, arrival)`` order (vLLM's ``max(self.running, key=...)``), whose
tokens already scheduled in this step are given back to the budget. A waiting
sequence of higher priority never preempts a running one: vLLM 0.32 orders
admission only.

Speculative decoding (``speculative_tokens`` k > 0, as vLLM's n-gram / prompt
lookup drafting, whose drafts cost no GPU time): a decoding sequence verifies
its next token plus k draft tokens in one step (k + 1 query tokens: more
compute and KV, the same single weight read), and emits the verified token
plus the leading drafts accepted, each accepted with ``acceptance_rate``
independently until the first rejection: 1 to k + 1 tokens per step, on
average (1 - a^(k+1)) / (1 - a) (Leviathan et al., "Fast Inference from
Transformers via Speculative Decoding", 2023). Rejected drafts' KV is dropped.
The acceptance falls as the batch grows (``acceptance_half_batch`` H): with B
sequences drafting in a step, a = ``acceptance_rate`` / (1 + (B - 1) / H), so
one sequence alone drafts at the profile's rate and H + 1 at half of it; the
counters are vLLM's (drafts, draft tokens, accepted tokens, accepted per
position) and each sequence keeps its own drafted and accepted counts, as
llama.cpp reports them per request.

The caller owns time: :meth:`Scheduler.schedule` returns a :class:`Step` with
its modelled duration, and :meth:`Scheduler.complete` applies it at a given
instant. The real-time server (``engine.py``) sleeps in between; the offline
simulator (``simulate.py``) just adds the durations up.
"""

from __future__ import annotations

import bisect
import random
from collections import deque
from collections.abc import Sequence as SequenceType
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from slogate.simengine.kvcache import KVCache
from slogate.simengine.profiles import Profile
from slogate.simengine.roofline import StepModel, StepWork


class Status(IntEnum):
    WAITING = 0
    RUNNING = 1
    FINISHED = 2
    ABORTED = 3


class Sequence:
    """One request's life in the engine. Lengths are in tokens.

    ``max_output`` is decided before arrival (by ``sampling.plan_output``): the
    engine generates exactly that many tokens, the last being EOS when
    ``stops_at_eos`` (finish reason ``stop``) or not (``length``)."""

    __slots__ = (
        "accepted_tokens",
        "arrival",
        "draft_tokens",
        "first_token_time",
        "last_token_time",
        "max_output",
        "num_blocks",
        "num_cached_tokens",
        "num_computed",
        "num_preemptions",
        "num_shared",
        "num_tokens",
        "output_len",
        "priority",
        "prompt_hashes",
        "prompt_len",
        "queued_at",
        "request_id",
        "scheduled_at",
        "sink",
        "status",
        "stops_at_eos",
    )

    def __init__(
        self,
        request_id: str,
        prompt_len: int,
        max_output: int,
        *,
        stops_at_eos: bool = False,
        arrival: float = 0.0,
        prompt_hashes: SequenceType[int] = (),
        sink: Any = None,
        priority: int = 0,
    ) -> None:
        if prompt_len < 1 or max_output < 1:
            raise ValueError("a sequence needs at least one prompt and one output token")
        self.request_id = request_id
        self.prompt_len = prompt_len
        self.max_output = max_output
        self.stops_at_eos = stops_at_eos
        self.arrival = arrival
        self.prompt_hashes = prompt_hashes
        self.priority = priority  # lower first, under the priority policy
        self.sink = sink  # opaque to the scheduler: the server's per-request stream
        self.status = Status.WAITING
        self.num_tokens = prompt_len  # prompt + output so far
        self.num_computed = 0  # tokens whose KV is in the cache
        # prompt tokens found computed at the first admission (vLLM's
        # num_cached_tokens: what usage.prompt_tokens_details reports); None before
        self.num_cached_tokens: int | None = None
        self.output_len = 0
        self.num_blocks = 0
        self.num_shared = 0
        self.num_preemptions = 0
        self.draft_tokens = 0  # speculative drafts verified, and of them accepted
        self.accepted_tokens = 0
        self.first_token_time: float | None = None
        self.queued_at: float | None = None  # model time it joined the scheduler's queue
        self.scheduled_at: float | None = None  # model time of its first step: prefill starts
        self.last_token_time = 0.0

    @property
    def finished(self) -> bool:
        return self.status >= Status.FINISHED

    @property
    def finish_reason(self) -> str | None:
        if self.status != Status.FINISHED:
            return None
        return "stop" if self.stops_at_eos else "length"


@dataclass(slots=True)
class Step:
    """One scheduled forward pass: sequence ``seqs[i]`` computes ``counts[i]`` tokens."""

    seqs: list[Sequence]
    counts: list[int]  # tokens computed, drafts included
    drafts: list[int]  # of which speculative draft tokens to verify
    work: StepWork
    duration: float


def rank(seq: Sequence) -> tuple[int, float, str]:
    """A sequence's place in the priority policy's queue (vLLM's ``Request.__lt__``)."""
    return (seq.priority, seq.arrival, seq.request_id)


class Scheduler:
    """The batching policy and the engine-wide counters vLLM exports."""

    def __init__(
        self, profile: Profile, step_model: StepModel | None = None, *, seed: int = 0
    ) -> None:
        self.profile = profile
        self.model = step_model or StepModel(profile)
        self.kv = KVCache(profile.kv_blocks, profile.block_size, profile.enable_prefix_caching)
        self.max_num_seqs = profile.scheduler_max_num_seqs
        self.max_num_batched_tokens = profile.scheduler_max_num_batched_tokens
        self.max_model_len = profile.effective_max_model_len
        self.reserve_full_sequence = profile.family.reserve_full_sequence
        self.chunked_prefill = profile.family.chunked_prefill
        self.speculative_tokens = profile.speculative_tokens
        self.acceptance_rate = profile.acceptance_rate
        self.acceptance_half_batch = profile.acceptance_half_batch
        self.by_priority = profile.scheduling_policy == "priority"
        self._rng = random.Random(seed)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        # Counters (vLLM's names in metrics.py).
        self.num_preemptions = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.num_steps = 0
        self.spec_drafts = 0
        self.spec_draft_tokens = 0
        self.spec_accepted_tokens = 0
        self.spec_accepted_per_position = [0] * self.speculative_tokens

    # -- requests ------------------------------------------------------------------
    def add(self, seq: Sequence) -> None:
        if seq.prompt_len + seq.max_output > self.max_model_len:
            raise ValueError(
                f"{seq.prompt_len} prompt + {seq.max_output} output tokens exceed "
                f"max_model_len {self.max_model_len}"
            )
        seq.status = Status.WAITING
        self._enqueue(seq)

    def _enqueue(self, seq: Sequence) -> None:
        """Into the waiting queue: last (FCFS), or at its rank (priority)."""
        if self.by_priority:
            self.waiting.insert(bisect.bisect_right(self.waiting, rank(seq), key=rank), seq)
        else:
            self.waiting.append(seq)

    def abort(self, seq: Sequence) -> None:
        """Drop a sequence (client gone): its blocks return to the pool."""
        if seq.finished:
            return
        if seq.status == Status.RUNNING:
            self.running.remove(seq)
            self.kv.release(seq)
        else:
            self.waiting.remove(seq)
        seq.status = Status.ABORTED

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # -- one step --------------------------------------------------------------------
    def schedule(self) -> Step:
        """Pick this step's batch; may preempt. An empty step means nothing can run."""
        kv = self.kv
        block_size = kv.block_size
        budget = self.max_num_batched_tokens
        running = self.running
        seqs: list[Sequence] = []
        counts: list[int] = []
        drafts: list[int] = []
        spec = self.speculative_tokens
        preempted = False

        i = 0
        while i < len(running) and budget > 0:
            seq = running[i]
            computed = seq.num_computed
            n = seq.num_tokens - computed
            draft = 0
            if spec and n == 1 and seq.output_len:
                draft = min(spec, seq.max_output - seq.output_len - 1, budget - 1)
                n += draft
            if n > budget:
                n = budget
            need = (computed + n + block_size - 1) // block_size - seq.num_blocks
            if need > 0 and not kv.grow(seq, need):
                while need > kv.num_free:
                    victim = self._victim()
                    if victim in seqs:  # scheduled earlier in this step: its tokens come back
                        at = seqs.index(victim)
                        budget += counts[at]
                        del seqs[at], counts[at], drafts[at]
                        i -= 1
                    self._preempt(victim)
                    preempted = True
                    if victim is seq:
                        break
                if seq.status != Status.RUNNING:
                    break
                kv.grow(seq, need)
            seqs.append(seq)
            counts.append(n)
            drafts.append(draft)
            budget -= n
            i += 1

        waiting = self.waiting
        reserve = self.reserve_full_sequence
        chunked = self.chunked_prefill
        prompts = 0  # waiting sequences admitted in this step
        while waiting and budget > 0 and not preempted and len(running) < self.max_num_seqs:
            seq = waiting[0]
            hits = kv.cached_prefix(seq, (seq.num_tokens - 1) // block_size)
            # A sequence may arrive with its KV computed elsewhere (disaggregated
            # prefill); a preempted one has lost its KV (num_computed 0).
            computed = max(hits * block_size, seq.num_computed)
            n = seq.num_tokens - computed
            if n > budget:
                if chunked:
                    n = budget
                elif n <= self.max_num_batched_tokens or prompts:
                    break  # the whole prompt waits for a step with room for it
            prompts += n > 1
            # The KV of the last output token is never computed: prompt + output - 1.
            held = seq.prompt_len + seq.max_output - 1 if reserve else computed + n
            need = (held + block_size - 1) // block_size - hits
            if not kv.admit(seq, hits, need):
                break
            waiting.popleft()
            seq.status = Status.RUNNING
            seq.num_computed = computed
            if seq.num_cached_tokens is None:
                seq.num_cached_tokens = computed
            running.append(seq)
            self.prefix_queries += seq.num_tokens
            self.prefix_hits += hits * block_size
            seqs.append(seq)
            counts.append(n)
            drafts.append(0)
            budget -= n

        work = step_work(seqs, counts, drafts)
        return Step(seqs, counts, drafts, work, self.model.seconds(work) if seqs else 0.0)

    def _victim(self) -> Sequence:
        """The running sequence to preempt: the last admitted (FCFS), or the
        last in ``(priority, arrival)`` order (priority); out of ``running``."""
        running = self.running
        if not self.by_priority:
            return running.pop()
        victim = max(running, key=lambda s: (s.priority, s.arrival))
        running.remove(victim)
        return victim

    def complete(self, step: Step, now: float) -> list[Sequence]:
        """Apply ``step`` as finished at ``now``: advance KV, emit tokens, retire
        finished sequences. Returns the sequences that got a token (finished
        ones included, with their final status)."""
        self.num_steps += 1
        kv = self.kv
        publish = kv.prefix_caching
        emitted: list[Sequence] = []
        finished = False
        tokens = 0
        rate = (
            self.acceptance_at(sum(1 for d in step.drafts if d)) if self.speculative_tokens else 0
        )
        for seq, n, draft in zip(step.seqs, step.counts, step.drafts, strict=True):
            if seq.status != Status.RUNNING:  # aborted or preempted meanwhile
                continue
            seq.num_computed += n - draft
            if seq.scheduled_at is None:
                seq.scheduled_at = now - step.duration
            if publish and seq.num_shared < len(seq.prompt_hashes):
                kv.publish(seq)
            if seq.num_computed == seq.num_tokens:
                if seq.output_len == 0:
                    seq.first_token_time = now
                    self.prompt_tokens += seq.prompt_len
                accepted = self._accepted(seq, draft, rate) if draft else 0
                seq.num_computed += accepted
                seq.output_len += 1 + accepted
                seq.num_tokens += 1 + accepted
                seq.last_token_time = now
                tokens += 1 + accepted
                emitted.append(seq)
                if seq.output_len >= seq.max_output:
                    seq.status = Status.FINISHED
                    kv.release(seq)
                    finished = True
        self.generation_tokens += tokens
        if finished:
            self.running = [s for s in self.running if s.status == Status.RUNNING]
        return emitted

    def acceptance_at(self, batch: int) -> float:
        """The chance that each draft is accepted in a step where ``batch``
        sequences draft (see the module's docstring)."""
        half = self.acceptance_half_batch
        if half <= 0 or batch <= 1:
            return self.acceptance_rate
        return self.acceptance_rate / (1.0 + (batch - 1) / half)

    def _accepted(self, seq: Sequence, drafts: int, rate: float) -> int:
        """Leading draft tokens accepted: each with ``rate``, until the first
        rejection; counted engine-wide (by position) and on the sequence."""
        rng, per_position = self._rng, self.spec_accepted_per_position
        accepted = 0
        while accepted < drafts and rng.random() < rate:
            per_position[accepted] += 1
            accepted += 1
        self.spec_drafts += 1
        self.spec_draft_tokens += drafts
        self.spec_accepted_tokens += accepted
        seq.draft_tokens += drafts
        seq.accepted_tokens += accepted
        return accepted

    def _preempt(self, seq: Sequence) -> None:
        """Recompute preemption: drop the KV cache, requeue at the head."""
        self.kv.release(seq)
        seq.status = Status.WAITING
        seq.num_computed = 0
        seq.num_preemptions += 1
        self.num_preemptions += 1
        if self.by_priority:
            self._enqueue(seq)  # vLLM's prepend_request: a heap has no head
        else:
            self.waiting.appendleft(seq)


def step_work(seqs: list[Sequence], counts: list[int], drafts: list[int]) -> StepWork:
    """What a step's batch computes, from each sequence's tokens already in
    the cache (``num_computed``, untouched until the step completes) and the
    tokens it computes now."""
    new_tokens = sampled = context = pairs = 0
    for seq, n, draft in zip(seqs, counts, drafts, strict=True):
        computed = seq.num_computed
        new_tokens += n
        context += computed
        pairs += n * computed + n * (n + 1) // 2
        if computed + n - draft == seq.num_tokens:
            sampled += 1 + draft  # the LM head runs on every verified position
    return StepWork(len(seqs), new_tokens, sampled, context, pairs)
