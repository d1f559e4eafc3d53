"""Continuous batching, paged KV cache, preemption and prefix caching, stepped by hand."""

from __future__ import annotations

import random

import pytest

from slogate.simengine.faults import NO_FAULTS, FaultInjector, Faults
from slogate.simengine.kvcache import block_hashes
from slogate.simengine.profiles import load_profile
from slogate.simengine.response_length import EosDistribution, plan_output
from slogate.simengine.scheduler import Scheduler, Sequence, Status
from slogate.simengine.simulate import simulate_closed_loop


def make(**settings) -> Scheduler:
    return Scheduler(load_profile("llama-3.1-8b@h100", **settings))


def run_to_end(scheduler: Scheduler, limit: int = 10_000) -> list[list[tuple[str, int]]]:
    """Step until idle; return each step's (request id, tokens) pairs."""
    steps, now = [], 0.0
    while scheduler.has_work() and len(steps) < limit:
        step = scheduler.schedule()
        assert step.seqs, "nothing schedulable"
        now += step.duration
        steps.append([(s.request_id, n) for s, n in zip(step.seqs, step.counts, strict=True)])
        scheduler.complete(step, now)
    return steps


def test_chunked_prefill_fills_the_token_budget() -> None:
    scheduler = make()
    seq = Sequence("a", 20_000, 3)
    scheduler.add(seq)
    steps = run_to_end(scheduler)
    assert steps == [[("a", 8192)], [("a", 8192)], [("a", 3616)], [("a", 1)], [("a", 1)]]
    assert seq.output_len == 3 and seq.finish_reason == "length"
    assert scheduler.prompt_tokens == 20_000 and scheduler.generation_tokens == 3


def test_first_token_arrives_when_the_last_prompt_chunk_is_done() -> None:
    scheduler = make()
    seq = Sequence("a", 10_000, 2)
    scheduler.add(seq)
    first = scheduler.schedule()
    assert scheduler.complete(first, 1.0) == [] and seq.first_token_time is None
    second = scheduler.schedule()
    assert second.work.sampled == 1 and second.work.context_tokens == 8192
    assert second.work.attention_pairs == 1808 * 8192 + 1808 * 1809 // 2
    assert scheduler.complete(second, 2.0) == [seq] and seq.first_token_time == 2.0


def test_decodes_and_new_prefills_share_a_step() -> None:
    scheduler = make()
    a, b = Sequence("a", 100, 5), Sequence("b", 50, 5)
    scheduler.add(a)
    scheduler.complete(scheduler.schedule(), 1.0)  # a's prefill
    scheduler.add(b)
    step = scheduler.schedule()
    assert list(zip(step.seqs, step.counts, strict=True)) == [(a, 1), (b, 50)]
    assert step.work.new_tokens == 51 and step.work.sampled == 2 and step.work.num_seqs == 2


def test_max_num_seqs_caps_the_batch() -> None:
    scheduler = make(max_num_seqs=2)
    for name in "abc":
        scheduler.add(Sequence(name, 10, 2))
    steps = run_to_end(scheduler)
    assert [name for name, _ in steps[0]] == ["a", "b"]
    assert all(len(step) <= 2 for step in steps)
    assert ("c", 10) in steps[2]  # admitted once a and b finished


def test_admission_waits_for_free_kv_blocks() -> None:
    scheduler = make(num_gpu_blocks=10)  # 160 tokens
    a, b = Sequence("a", 100, 4), Sequence("b", 100, 4)  # 7 blocks each
    scheduler.add(a)
    scheduler.add(b)
    step = scheduler.schedule()
    assert step.seqs == [a] and scheduler.waiting[0] is b
    assert scheduler.kv.num_used == 7 and scheduler.kv.usage == pytest.approx(0.7)
    run_to_end(scheduler)
    assert b.output_len == 4 and scheduler.kv.num_used == 0


def test_preemption_recomputes_the_youngest_sequence() -> None:
    scheduler = make(num_gpu_blocks=8, enable_prefix_caching=False)  # 128 tokens
    a, b = Sequence("a", 60, 20), Sequence("b", 60, 20)  # 4 blocks each at admission
    scheduler.add(a)
    scheduler.add(b)
    steps = run_to_end(scheduler)
    assert scheduler.num_preemptions >= 1 and b.num_preemptions >= 1 and a.num_preemptions == 0
    # b came back and recomputed its prompt plus the tokens it had produced
    recompute = [n for step in steps for name, n in step if name == "b" and n > 1]
    assert recompute[0] == 60 and recompute[1] > 60
    assert a.output_len == b.output_len == 20
    assert scheduler.generation_tokens == 40 and scheduler.kv.num_used == 0


def test_prefix_caching_skips_a_shared_prompt_prefix() -> None:
    scheduler = make()
    ids = list(range(100, 164))  # 64 tokens: 4 full blocks
    hashes = block_hashes(ids, 16)
    first = Sequence("a", 64, 2, prompt_hashes=hashes)
    scheduler.add(first)
    run_to_end(scheduler)
    second = Sequence("b", 64, 2, prompt_hashes=hashes)
    scheduler.add(second)
    step = scheduler.schedule()
    # 3 blocks are reused; the last one is recomputed so the model has a token to sample from
    assert step.counts == [16] and step.work.context_tokens == 48
    assert scheduler.prefix_hits == 48 and scheduler.prefix_queries == 128
    other = Sequence("c", 64, 2, prompt_hashes=block_hashes([7, *ids[1:]], 16))
    scheduler.complete(step, 1.0)
    scheduler.add(other)
    assert scheduler.schedule().counts[-1] == 64  # a different first block: no hit at all


def test_identical_prompts_in_flight_share_their_blocks() -> None:
    scheduler = make()
    hashes = block_hashes(list(range(64)), 16)
    a, b = Sequence("a", 64, 3, prompt_hashes=hashes), Sequence("b", 64, 3, prompt_hashes=hashes)
    scheduler.add(a)
    scheduler.add(b)
    step = scheduler.schedule()
    assert scheduler.kv.num_used == 8
    scheduler.complete(step, 1.0)
    assert scheduler.kv.num_used == 4  # b's copies went back to the pool
    run_to_end(scheduler)
    assert scheduler.kv.num_used == 0 and scheduler.kv.num_free == scheduler.kv.num_blocks


def test_abort_frees_blocks_and_skips_in_flight_work() -> None:
    scheduler = make()
    seq = Sequence("a", 1000, 10)
    scheduler.add(seq)
    step = scheduler.schedule()
    assert scheduler.kv.num_used == 63
    scheduler.abort(seq)
    assert seq.status == Status.ABORTED and scheduler.kv.num_used == 0
    assert scheduler.complete(step, 1.0) == [] and not scheduler.has_work()


def test_requests_longer_than_the_model_are_refused() -> None:
    scheduler = make(max_model_len=1000)
    with pytest.raises(ValueError, match="max_model_len"):
        scheduler.add(Sequence("a", 900, 101))
    # the KV cache also bounds the served length
    assert make(num_gpu_blocks=10).max_model_len == 160


def test_closed_loop_throughput_rises_and_latency_rises_with_concurrency() -> None:
    profile = load_profile("llama-3.1-8b@h100")
    results = [
        simulate_closed_loop(profile, concurrency=c, input_tokens=512, output_tokens=128)
        for c in (1, 8, 64)
    ]
    throughput = [r.output_tokens_per_s for r in results]
    tpot = [r.tpot_mean_s for r in results]
    assert throughput == sorted(throughput) and throughput[2] > 20 * throughput[0]
    assert tpot == sorted(tpot)


def test_output_length_plan_honours_limits() -> None:
    rng, eos = random.Random(1), EosDistribution()
    assert plan_output(rng, eos, limit=50, ignore_eos=True).tokens == 50
    plans = [plan_output(rng, eos, limit=400, min_tokens=20) for _ in range(2000)]
    lengths = sorted(p.tokens for p in plans)
    assert all(21 <= n <= 400 for n in lengths)
    assert all(p.finish_reason == "stop" for p in plans if p.tokens < 400)
    assert 110 < lengths[1000] < 150  # median near the conversation trace's 129
    assert any(p.finish_reason == "length" for p in plans)


def test_fault_injector_draws() -> None:
    assert FaultInjector(Faults(), random.Random(0)).draw(100) is NO_FAULTS
    injector = FaultInjector(Faults(stall_s=1.0, stall_count=2), random.Random(0))
    stalls = [injector.draw(100).stall_at for _ in range(5)]
    assert [s is not None for s in stalls] == [True, True, False, False, False]
    injector.set(Faults(http_429_rate=0.5, http_503_rate=0.5))
    assert {injector.draw(100).http_status for _ in range(200)} == {429, 503}
    mid = FaultInjector(Faults(stream_error_rate=1.0), random.Random(0))
    assert all(1 <= mid.draw(10).error_at <= 9 for _ in range(100))
    assert mid.draw(1).error_at is None  # nothing strictly inside a one-token reply
