"""Disaggregated prefill/decode: separate instances, a KV transfer between them,
and decode steps that no prefill chunk stretches."""

from __future__ import annotations

import pytest

from slogate.simengine.config import build_config
from slogate.simengine.engine import Engine
from slogate.simengine.profiles import ProfileError, load_profile
from slogate.simengine.simulate import kv_transfer_seconds, simulate_closed_loop

BASE = "llama-3.1-8b@h100:fp8"


def run(profile: str, concurrency: int = 32, **settings):
    return simulate_closed_loop(
        load_profile(profile, **settings),
        concurrency=concurrency,
        input_tokens=4000,
        output_tokens=200,
        requests=3 * concurrency,
    )


def test_decode_steps_are_not_stretched_by_prefills() -> None:
    colocated, split = run(BASE), run(BASE, disaggregated=True)
    # colocated: every decode step shares the GPU with 4000-token prefill chunks
    assert split.tpot_mean_s < 0.7 * colocated.tpot_mean_s
    # and the two instances together serve more than one that does both
    assert split.output_tokens_per_s > 1.5 * colocated.output_tokens_per_s
    assert split.preemptions == colocated.preemptions == 0


def test_the_kv_transfer_is_paid_between_first_and_second_token() -> None:
    # one client: nothing else runs, so the transfer shows up undiluted
    fast = run(BASE, 1, disaggregated=True, kv_transfer_gbps=1000)
    slow = run(BASE, 1, disaggregated=True, kv_transfer_gbps=1)
    transfer = kv_transfer_seconds(load_profile(BASE, kv_transfer_gbps=1), 4000)
    assert transfer == pytest.approx(4000 * 131072 / 1e9)  # 0.52 s over 1 GB/s
    # the first token comes from the prefill instance: TTFT does not pay the transfer
    assert slow.ttft_mean_s == pytest.approx(fast.ttft_mean_s, rel=1e-6)
    # the second token waits for the KV: spread over the request's 199 gaps
    extra = (slow.tpot_mean_s - fast.tpot_mean_s) * 199
    fast_transfer = kv_transfer_seconds(load_profile(BASE, kv_transfer_gbps=1000), 4000)
    assert extra == pytest.approx(transfer - fast_transfer, rel=1e-6)


def test_the_live_engine_refuses_a_disaggregated_profile_by_name() -> None:
    config = build_config(f"{BASE}:disaggregated=true")
    with pytest.raises(ProfileError, match="disaggregated prefill/decode runs in the offline"):
        Engine(config)
