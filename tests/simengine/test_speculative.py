"""Speculative decoding: several tokens per step at the acceptance rate, each
step verifying k + 1 tokens; streamed in chunks of several tokens, with the
per-token latency the model predicts; the acceptance falling as the batch
grows, and the counters vLLM and llama.cpp report (engine-wide on /metrics,
per request in the final chunk's timings)."""

from __future__ import annotations

import asyncio
from itertools import pairwise

import aiohttp
import orjson
import pytest
from simprobe import completion_body, probe, probe_many

from slogate.analysis.engine_side.server_metrics import snapshot
from slogate.engines.simulated import start_engine
from slogate.locustfiles.scraper import fetch_text, metrics_url_for
from slogate.simengine.profiles import ProfileError, load_profile
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


def decode_together(profile: str, sequences: int, output: int, seed: int = 5) -> Scheduler:
    """``sequences`` admitted at once and decoded to the end, side by side."""
    scheduler = Scheduler(load_profile(profile), seed=seed)
    for i in range(sequences):
        scheduler.add(Sequence(str(i), 64, output))
    now = 0.0
    while scheduler.has_work():
        step = scheduler.schedule()
        now += step.duration
        scheduler.complete(step, now)
    return scheduler


def test_acceptance_falls_as_the_batch_grows() -> None:
    scheduler = Scheduler(load_profile(SPEC + ":acceptance_half_batch=8"))
    assert scheduler.acceptance_at(1) == 0.7
    assert scheduler.acceptance_at(9) == pytest.approx(0.35)  # H + 1 drafting: half
    rates = [scheduler.acceptance_at(b) for b in (1, 2, 4, 16, 64)]
    assert rates == sorted(rates, reverse=True)
    constant = Scheduler(load_profile(SPEC + ":acceptance_half_batch=0"))
    assert constant.acceptance_at(64) == 0.7
    with pytest.raises(ProfileError, match="acceptance_half_batch"):
        load_profile(SPEC + ":acceptance_half_batch=-1")


@pytest.mark.parametrize(("sequences", "half"), [(1, 32), (16, 4)])
def test_first_position_is_accepted_at_the_batchs_rate(sequences: int, half: int) -> None:
    """Position 0 is accepted with the step's rate, so over many drafts its
    share is that rate: 0.7 alone, 0.7 / (1 + 15/4) for 16 side by side
    (the last steps, with fewer left drafting, pull it up a little)."""
    profile = SPEC + f":acceptance_half_batch={half}"
    scheduler = decode_together(profile, sequences, 800)
    expected = scheduler.acceptance_at(sequences)
    first = scheduler.spec_accepted_per_position[0] / scheduler.spec_drafts
    assert first == pytest.approx(expected, rel=0.08)


def test_counters_add_up_engine_wide_and_per_sequence() -> None:
    scheduler = Scheduler(load_profile(SPEC), seed=2)
    seqs = [Sequence(str(i), 64, 300) for i in range(4)]
    for seq in seqs:
        scheduler.add(seq)
    now = 0.0
    while scheduler.has_work():
        step = scheduler.schedule()
        now += step.duration
        scheduler.complete(step, now)
    assert scheduler.spec_draft_tokens == sum(s.draft_tokens for s in seqs) > 0
    assert scheduler.spec_accepted_tokens == sum(s.accepted_tokens for s in seqs)
    assert scheduler.spec_accepted_tokens == sum(scheduler.spec_accepted_per_position)
    per_position = scheduler.spec_accepted_per_position
    assert per_position == sorted(per_position, reverse=True)  # accepted until the first miss
    # every output token is the verified one of a step or an accepted draft
    steps_with_tokens = scheduler.generation_tokens - scheduler.spec_accepted_tokens
    assert scheduler.spec_drafts <= steps_with_tokens


def test_the_live_engine_exposes_vllms_counters_and_llamacpps_per_request_timings() -> None:
    """Two requests on a speculative engine: each final usage chunk carries
    its own draft_n/draft_n_accepted, /metrics has vLLM's spec_decode
    counters, and their canonical reading equals the requests' sums."""
    bodies = [completion_body(32, 120) for _ in range(2)]
    with start_engine(SPEC, speedup=20.0, seed=3) as engine:
        results = asyncio.run(probe_many(engine.url + "/v1/completions", bodies))
        text = fetch_text(metrics_url_for(engine.url), 10.0)
    timings = []
    for result in results:
        assert result.done
        final = orjson.loads(result.events[-2][1])
        timings.append(final["timings"])
    drafted = sum(t["draft_n"] for t in timings)
    accepted = sum(t["draft_n_accepted"] for t in timings)
    assert 0 < accepted < drafted
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_total" in text
    series = snapshot(text).series
    assert series["spec_draft_tokens_total"] == drafted
    assert series["spec_accepted_tokens_total"] == accepted
    positions = [series[f"spec_accepted_per_position_total:{i}"] for i in range(3)]
    assert sum(positions) == accepted
    assert series["spec_drafts_total"] >= positions[0]


def test_an_engine_without_speculation_says_nothing_of_it() -> None:
    with start_engine("llama-3.1-8b@h100", speedup=20.0) as engine:
        (result,) = asyncio.run(probe_many(engine.url + "/v1/completions", [completion_body(8, 8)]))
        text = fetch_text(metrics_url_for(engine.url), 10.0)
    # timings come with every reply (TTFT taken apart); the drafts only with one that drafted
    assert b"draft_n" not in result.events[-2][1]
    assert not any(key.startswith("spec_") for key in snapshot(text).series)
