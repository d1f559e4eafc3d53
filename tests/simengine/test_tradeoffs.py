"""What the simulated engine's settings teach a tune, on the offline simulator.

Published results say how real engines move (docs/simengine.md, "What the
settings teach"); a tune on the simulated engine must find the same:

- chunked prefill's token budget (``max_num_batched_tokens``) trades TTFT
  against inter-token latency (Agrawal et al., Sarathi-Serve, OSDI 2024; vLLM's
  tuning guide): a small budget bounds the stall a prompt chunk adds to every
  decode in its step, so ITL's tail follows the budget, while the prompt takes
  more steps, so TTFT rises;
- the batch cap (``max_num_seqs``) trades throughput against per-token latency
  (Yu et al., Orca, OSDI 2022; Kwon et al., vLLM, SOSP 2023): more sequences per
  step share each read of the weights, so tokens per second rise, and each step
  is longer, so each sequence's tokens come slower.
"""

from __future__ import annotations

from slogate.simengine.profiles import load_profile
from slogate.simengine.simulate import SimResult, simulate_closed_loop

PROFILE = "llama-3.1-8b@h100"


def run(concurrency: int, prompt: int, output: int, **settings: int) -> SimResult:
    profile = load_profile(PROFILE, **settings)
    return simulate_closed_loop(
        profile, concurrency=concurrency, input_tokens=prompt, output_tokens=output
    )


def test_a_smaller_token_budget_bounds_itl_and_costs_ttft() -> None:
    # 16 clients of 4,000-token prompts: a prompt is always being prefilled
    # beside 15 decoding sequences, as in Sarathi-Serve's mixed batches
    budgets = (256, 512, 2048)
    results = [run(16, 4000, 256, max_num_batched_tokens=b) for b in budgets]
    itl_p99 = [r.itl_p99_s for r in results]
    ttft = [r.ttft_mean_s for r in results]
    assert itl_p99 == sorted(itl_p99) and ttft == sorted(ttft, reverse=True)
    # the stall is the step a chunk rides in, so ITL's tail grows with the budget
    # (13.1, 18.6, 57.6 ms): x4 the budget from 512, x3.1 the tail ...
    assert itl_p99[2] > 2.5 * itl_p99[1]
    # ... while the prompt's TTFT falls by a quarter or more (240, 184, 169 ms)
    assert ttft[0] > 1.25 * ttft[2]
    # unchunked-sized budgets let one step hold a whole prompt: the stall is
    # its whole prefill (221 ms), over ten decode steps
    whole = run(16, 4000, 256, max_num_batched_tokens=8192)
    assert whole.itl_max_s > 10 * results[0].tpot_mean_s


def test_a_larger_batch_cap_buys_throughput_with_per_token_latency() -> None:
    # 256 clients, more than any cap below: the cap decides the batch
    caps = (4, 16, 64, 256)
    results = [run(256, 512, 256, max_num_seqs=c) for c in caps]
    throughput = [r.output_tokens_per_s for r in results]
    tpot = [r.tpot_mean_s for r in results]
    assert throughput == sorted(throughput) and tpot == sorted(tpot)
    # x64 the batch: x15 the tokens per second (518 to 8038), x3.7 the TPOT (7.5 to 27.6 ms)
    assert throughput[-1] > 10 * throughput[0]
    assert tpot[-1] > 3 * tpot[0]
    # decode-bound at a small cap: each running sequence makes a token a step
    assert abs(throughput[0] * tpot[0] / caps[0] - 1) < 0.1
