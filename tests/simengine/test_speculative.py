"""Speculative decoding: several tokens per step at the acceptance rate, each
step verifying k + 1 tokens; streamed in chunks of several tokens, with the
per-token latency the model predicts."""

from __future__ import annotations

import asyncio
from itertools import pairwise

import aiohttp
import pytest
from simprobe import completion_body, probe

from slogate.engines.simulated import start_engine
from slogate.simengine.profiles import load_profile
from slogate.simengine.roofline import StepModel, StepWork
from slogate.simengine.scheduler import Scheduler, Sequence

SPEC = "llama-3.1-8b@h100:speculative_tokens=3:acceptance_rate=0.7"


def bursts(profile: str, output: int = 2000) -> tuple[list[int], Scheduler]:
    """Tokens emitted per step for one sequence decoding ``output`` tokens."""
    scheduler = Scheduler(load_profile(profile), seed=7)
    seq = Sequence("a", 100, output)
    scheduler.add(seq)
    sizes, now, before = [], 0.0, 0
    while scheduler.has_work():
        step = scheduler.schedule()
        now += step.duration
        scheduler.complete(step, now)
        if seq.output_len > before:
            sizes.append(seq.output_len - before)
            before = seq.output_len
    assert seq.output_len == output and seq.finish_reason == "length"
    return sizes[1:], scheduler  # the first token comes from the prefill


@pytest.mark.parametrize(("rate", "expected"), [(0.0, {1}), (1.0, {4})])
def test_acceptance_extremes(rate: float, expected: set[int]) -> None:
    sizes, _ = bursts(f"llama-3.1-8b@h100:speculative_tokens=3:acceptance_rate={rate}")
    assert set(sizes[:-1]) == expected  # the last step is capped at max_tokens


def test_tokens_per_step_follow_the_acceptance_rate() -> None:
    sizes, scheduler = bursts(SPEC)
    assert set(sizes) <= {1, 2, 3, 4}
    mean = sum(sizes) / len(sizes)
    assert mean == pytest.approx((1 - 0.7**4) / (1 - 0.7), rel=0.05)  # 2.53
    assert scheduler.generation_tokens == 2000


def test_a_verify_step_computes_k_plus_one_tokens_per_sequence() -> None:
    scheduler = Scheduler(load_profile(SPEC))
    seqs = [Sequence(str(i), 100, 50) for i in range(4)]
    for seq in seqs:
        scheduler.add(seq)
    scheduler.complete(scheduler.schedule(), 1.0)  # prefills
    step = scheduler.schedule()
    assert step.counts == [4, 4, 4, 4] and step.drafts == [3, 3, 3, 3]
    assert step.work.new_tokens == 16 and step.work.sampled == 16


def test_kv_never_holds_rejected_drafts_as_computed() -> None:
    _, scheduler = bursts(SPEC, output=300)
    assert scheduler.kv.num_used == 0  # everything returned at the end
    scheduler = Scheduler(load_profile(SPEC), seed=1)
    seq = Sequence("a", 100, 300)
    scheduler.add(seq)
    now = 0.0
    while seq.output_len < 150:
        step = scheduler.schedule()
        now += step.duration
        scheduler.complete(step, now)
        assert seq.num_computed == seq.num_tokens - 1


def test_streamed_chunks_carry_several_tokens_and_itl_per_token_is_right() -> None:
    profile = load_profile(SPEC)
    model = StepModel(profile)
    step_s = model.seconds(StepWork(1, 4, 4, 256, 4 * 256 + 10))  # a verify step at ~256 context
    mean_tokens = (1 - 0.7**4) / (1 - 0.7)
    speedup = 2.0

    async def go():
        async with aiohttp.ClientSession() as session:
            body = completion_body(
                64, 400, stream_options={"include_usage": True, "continuous_usage_stats": True}
            )
            return await probe(session, engine.url + "/v1/completions", body)

    with start_engine(SPEC, speedup=speedup, seed=3) as engine:
        result = asyncio.run(go())
    counts = [obj["usage"]["completion_tokens"] for _, obj in result.chunks if obj.get("choices")]
    per_chunk = [b - a for a, b in pairwise(counts)]
    assert counts[-1] == 400
    assert max(per_chunk) > 1 and set(per_chunk) <= {1, 2, 3, 4}
    assert sum(per_chunk) / len(per_chunk) == pytest.approx(mean_tokens, rel=0.15)
    # per token: one verify step shared by the tokens it accepted (wall time at speedup 2)
    assert result.tpot_s * speedup == pytest.approx(step_s / mean_tokens, rel=0.25)
