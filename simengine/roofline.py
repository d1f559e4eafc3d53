"""The roofline model: how long one engine step takes on the profile's GPUs.

A step of continuous batching runs one forward pass over every token scheduled
in it (prefill chunks and one token per decoding sequence). Its time is the
sum of two kernel groups that run one after the other, each bounded by its
own roofline, plus fixed costs::

    linear    = blend(linear FLOPs / (peak x matmul), weight bytes / (HBM x bandwidth))
    attention = max(attention FLOPs / (bf16 peak x attention),
                    KV bytes / (HBM x kv_bandwidth))
    time      = linear + attention + overheads + tensor-parallel all-reduces

(prefill is compute bound, decode bandwidth bound; a big decode batch over
long contexts is bound by its GEMMs and its KV reads one after the other,
not by whichever is larger). ``blend`` is (a^n + b^n)^(1/n) with n the
profile's ``roofline_exponent``: a GEMM near the ridge point is slower than
either floor alone; n = infinity is the plain max().

FLOPs are 2 per linear parameter per token, 2 per LM-head parameter per sampled
token, and 4 x heads x head_dim per layer for every (query, key) pair of
attention, so long contexts cost prefill time. Bytes are the weights (read once
per step, shared by the whole batch: why batching raises throughput almost for
free while decode is bandwidth bound) plus the KV cache of every context token
the batch attends to (why long contexts and big batches slow decode down).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slogate.simengine.profiles import Profile


@dataclass(frozen=True, slots=True)
class StepWork:
    """What one step computes, summed over its sequences."""

    num_seqs: int  # sequences in the batch
    new_tokens: int  # tokens whose KV is computed (prefill chunks + one per decode)
    sampled: int  # sequences that sample a token at the end of the step
    context_tokens: int  # tokens already cached that the batch attends to
    attention_pairs: int  # (query, key) pairs, causal, over all layers' heads once

    @staticmethod
    def for_chunk(context: int, new: int) -> int:
        """Attention pairs of ``new`` tokens appended to ``context`` cached ones:
        token i (0-based) attends to context + i + 1 keys."""
        return new * context + new * (new + 1) // 2


@dataclass(frozen=True, slots=True)
class StepCost:
    """A step's time and the numbers behind it (for tests, docs and planning)."""

    flops: float
    bytes: float
    compute_s: float  # all FLOPs at their peaks (linear, LM head, attention)
    memory_s: float  # all bytes (weights, KV) at their bandwidths
    linear_s: float  # the linear layers and LM head: max(their FLOPs, weight reads)
    attention_s: float  # attention: max(its FLOPs, KV reads)
    comm_s: float
    overhead_s: float

    @property
    def seconds(self) -> float:
        return self.linear_s + self.attention_s + self.comm_s + self.overhead_s

    @property
    def bound(self) -> str:
        """Which floor dominates: ``compute`` or ``memory``."""
        return "compute" if self.compute_s >= self.memory_s else "memory"


class StepModel:
    """Step cost for one profile; constants are folded once so the scheduler's
    per-step call is a handful of multiplications."""

    def __init__(self, profile: Profile) -> None:
        model, gpu, eff, tp = profile.model, profile.gpu, profile.efficiency, profile.tp
        bf16_peak = gpu.flops_per_s["bf16"] * tp
        linear_peak = gpu.flops_per_s[profile.compute_type] * tp
        bandwidth = gpu.hbm_bytes_per_s * tp * eff.bandwidth
        kv_bandwidth = gpu.hbm_bytes_per_s * tp * eff.kv_bandwidth

        self.linear_flops_per_token = 2.0 * model.linear_params
        self.head_flops_per_sample = 2.0 * model.head_params
        self.attention_flops_per_pair = 4.0 * model.layers * model.heads * model.head_dim
        self.weight_bytes = float(profile.weight_bytes_read_per_step)
        # Per-GPU KV bytes x tp: replicated KV heads (tp > kv_heads) cost every GPU.
        self.kv_bytes_per_token = float(profile.kv_bytes_per_token_per_gpu * tp)

        self._linear_s = self.linear_flops_per_token / (linear_peak * eff.matmul)
        self._head_s = self.head_flops_per_sample / (bf16_peak * eff.matmul)
        self._attention_s = self.attention_flops_per_pair / (bf16_peak * eff.attention)
        self._weights_s = self.weight_bytes / bandwidth
        self._kv_s = self.kv_bytes_per_token / kv_bandwidth
        self._exponent = eff.roofline_exponent
        # SGLang's overlap scheduler prepares the next batch on the CPU while
        # the GPU runs this one: the per-step CPU cost leaves the critical path.
        self._step_overhead_s = 0.0 if profile.family.overlap_schedule else eff.step_overhead_s
        self._per_seq_s = eff.per_seq_overhead_s
        # Two all-reduces of the hidden state per layer (after attention and MLP).
        # A ring all-reduce takes 2 (tp - 1) neighbour steps: its fixed cost grows
        # with tp - 1 (``allreduce_us`` per neighbour, 2 GPUs: one), and it moves
        # 2 (tp - 1) / tp of the data over each link at NCCL's achieved share of
        # the line rate (``efficiency.link``; docs/simengine.md has the sources).
        if tp > 1:
            self._allreduce_fixed_s = 2 * model.layers * gpu.allreduce_s * (tp - 1)
            ring = 2 * (tp - 1) / tp
            self._allreduce_per_token_s = (
                2 * model.layers * ring * model.hidden * 2 / (gpu.link_bytes_per_s * eff.link)
            )
        else:
            self._allreduce_fixed_s = 0.0
            self._allreduce_per_token_s = 0.0

    def seconds(self, work: StepWork) -> float:
        """The step's duration (the scheduler's hot path)."""
        linear = self._linear_seconds(
            work.new_tokens * self._linear_s + work.sampled * self._head_s
        )
        attention = work.attention_pairs * self._attention_s
        kv = (work.context_tokens + work.new_tokens) * self._kv_s
        if attention < kv:
            attention = kv
        comm = self._allreduce_fixed_s + work.new_tokens * self._allreduce_per_token_s
        overhead = self._step_overhead_s + work.num_seqs * self._per_seq_s
        return linear + attention + comm + overhead

    def _linear_seconds(self, compute_s: float) -> float:
        """GEMMs near the ridge point (a batch of a few hundred tokens) are
        neither purely compute nor purely bandwidth bound: their time exceeds
        both floors, by 41% where the two are equal at exponent 2."""
        if self._exponent == math.inf:
            return compute_s if compute_s > self._weights_s else self._weights_s
        n = self._exponent
        return (compute_s**n + self._weights_s**n) ** (1 / n)

    def cost(self, work: StepWork) -> StepCost:
        """The same number as :meth:`seconds`, with its parts."""
        flops = (
            work.new_tokens * self.linear_flops_per_token
            + work.sampled * self.head_flops_per_sample
            + work.attention_pairs * self.attention_flops_per_pair
        )
        linear = work.new_tokens * self._linear_s + work.sampled * self._head_s
        attention = work.attention_pairs * self._attention_s
        kv = (work.context_tokens + work.new_tokens) * self._kv_s
        return StepCost(
            flops=flops,
            bytes=self.weight_bytes
            + (work.context_tokens + work.new_tokens) * self.kv_bytes_per_token,
            compute_s=linear + attention,
            memory_s=self._weights_s + kv,
            linear_s=self._linear_seconds(linear),
            attention_s=max(attention, kv),
            comm_s=self._allreduce_fixed_s + work.new_tokens * self._allreduce_per_token_s,
            overhead_s=self._step_overhead_s + work.num_seqs * self._per_seq_s,
        )

    def decode_step_seconds(self, batch: int, context: int) -> float:
        """A pure decode step: ``batch`` sequences with ``context`` cached tokens each."""
        return self.seconds(
            StepWork(
                num_seqs=batch,
                new_tokens=batch,
                sampled=batch,
                context_tokens=batch * context,
                attention_pairs=batch * StepWork.for_chunk(context, 1),
            )
        )

    def prefill_seconds(self, prompt: int, chunk: int) -> float:
        """Prefill of one prompt alone in chunks of ``chunk`` tokens (TTFT at load 0)."""
        total, done = 0.0, 0
        while done < prompt:
            n = min(chunk, prompt - done)
            total += self.seconds(
                StepWork(
                    num_seqs=1,
                    new_tokens=n,
                    sampled=1 if done + n == prompt else 0,
                    context_tokens=done,
                    attention_pairs=StepWork.for_chunk(done, n),
                )
            )
            done += n
        return total
