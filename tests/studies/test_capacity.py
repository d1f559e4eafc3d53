"""Capacity arithmetic: the KV planner against hand computation, cost, the max search, knees."""

from __future__ import annotations

import argparse
import contextlib
import io
import json

import pytest

from slogate.analysis.documents.contracts import SloEntry
from slogate.analysis.measurement.costs import (
    Pricing,
    cost_block,
    cost_per_million,
    kv_formula,
    kv_plan,
)
from slogate.cli import main
from slogate.plan_cmd import add_arguments, plan_command
from slogate.simengine.profiles import ProfileError, load_profile
from slogate.studies.max_load import MaxSearch, knee_index, limiting_slo
from slogate.studies.plan import PlanRequest, request_profile

MIB, GIB = 1024**2, 1024**3


def test_worked_example_llama2_7b_batch4_4096_fp16():
    """2 x 4 x 32 x 4096 x 4096 x 2 bytes = 8,589,934,592 bytes, about 8.6 GB."""
    profile = load_profile("llama-2-7b@a100:fp16")
    plan = kv_plan(profile, context_tokens=4096, batch=4)
    assert plan.batch_kv_bytes == 2 * 4 * 32 * 4096 * 4096 * 2 == 8_589_934_592
    assert round(plan.batch_kv_bytes / 1e9, 1) == 8.6
    formula = kv_formula(profile, batch=4, seq_len=4096)
    assert formula.expression == "2 x 4 x 32 x 4096 x 4096 x 2 bytes"
    assert formula.bytes == plan.batch_kv_bytes
    # "plus about 14 GB of parameters, over 22 GB: tight on a 24 GB card"
    assert round(profile.weight_bytes / 1e9, 1) == 13.5
    assert (plan.weight_bytes + plan.batch_kv_bytes) / 1e9 > 22


def test_kv_formula_uses_kv_width_not_hidden_size_under_gqa():
    """Llama-3.1-8B has 8 KV heads of 128: the K/V width is 1024, not its hidden 4096."""
    profile = load_profile("llama-3.1-8b@h100")
    formula = kv_formula(profile, batch=1, seq_len=1)
    assert (formula.layers, formula.width, formula.bytes_per_element) == (32, 1024, 2)
    assert formula.bytes == profile.kv_bytes_per_token == 128 * 1024


@pytest.mark.parametrize(
    ("name", "kv_bytes_per_token"),
    [
        ("llama-3.1-8b@h100", 2 * 32 * 8 * 128 * 2),  # 128 KiB
        ("llama-3.1-8b@h100:kv=fp8", 2 * 32 * 8 * 128 * 1),
        ("llama-3.1-70b@2xh100:fp8", 2 * 80 * 8 * 128 * 2),  # 320 KiB
        ("qwen2.5-7b@l40s", 2 * 28 * 4 * 128 * 2),  # 56 KiB
        ("llama-2-7b@a100:fp16", 2 * 32 * 32 * 128 * 2),  # 512 KiB
    ],
)
def test_kv_bytes_per_token_by_hand(name, kv_bytes_per_token):
    assert kv_plan(load_profile(name), 1024).kv_bytes_per_token == kv_bytes_per_token


def test_llama31_8b_on_h100_capacity_by_hand():
    """vLLM's formula written out: 0.9 x memory - weights - runtime reserve, in blocks of 16."""
    layers, hidden, heads, kv_heads, head_dim, inter, vocab = 32, 4096, 32, 8, 128, 14336, 128256
    linear = layers * (
        2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * inter
    )
    weights = 2 * (linear + 2 * vocab * hidden)  # bf16, untied embedding and LM head
    reserve = GIB + 8192 * (4 * hidden + 2 * inter) * 2
    budget = int(81559 * MIB * 0.9 - weights - reserve)
    blocks = budget // (2 * layers * kv_heads * head_dim * 2 * 16)

    plan = kv_plan(load_profile("llama-3.1-8b@h100"), context_tokens=4096, batch=64)
    assert plan.weight_bytes == weights
    assert plan.kv_budget_bytes == budget
    assert plan.kv_capacity_tokens == blocks * 16
    assert plan.blocks_per_sequence == 256
    assert plan.max_sequences_by_kv == blocks // 256
    assert plan.max_concurrent_sequences == min(blocks // 256, 1024)
    assert plan.limited_by == "kv_cache"
    assert plan.batch_kv_bytes == 64 * 4096 * 131072
    assert plan.batch_fits is True


def test_partial_blocks_count_whole_and_the_scheduler_can_be_the_limit():
    profile = load_profile("llama-3.1-8b@h100:max_num_seqs=8")
    plan = kv_plan(profile, context_tokens=17)
    assert plan.blocks_per_sequence == 2
    assert plan.max_sequences_by_kv == profile.kv_blocks // 2
    assert plan.max_concurrent_sequences == 8 and plan.limited_by == "max_num_seqs"


def test_a_batch_that_does_not_fit_says_so():
    plan = kv_plan(load_profile("llama-2-7b@l4:fp16"), context_tokens=4096, batch=64)
    assert plan.max_sequences_by_kv < 64
    assert plan.batch_fits is False


def test_bad_plan_input_is_named():
    profile = load_profile("llama-3.1-8b@h100")
    with pytest.raises(ValueError, match="context length"):
        kv_plan(profile, 0)
    with pytest.raises(ValueError, match="batch"):
        kv_plan(profile, 128, batch=0)


def test_cost_per_million_tokens():
    pricing = Pricing(gpu_price_per_hour=2.0, gpus=2)
    # 4 per hour over 1000 tokens/s = 3.6 M tokens per hour
    assert cost_per_million(1000.0, pricing) == pytest.approx(4.0 / 3.6)
    assert cost_per_million(0.0, pricing) is None
    assert cost_per_million(None, pricing) is None
    block = cost_block(pricing, 1000.0, 4000.0, "measured")
    assert block["per_million_output_tokens"] == pytest.approx(1.1111, rel=1e-4)
    assert block["per_million_input_tokens"] == pytest.approx(0.2778, rel=1e-3)
    assert block["basis"] == "measured" and block["price_per_hour"] == 4.0


def test_pricing_rejects_nonsense():
    with pytest.raises(ValueError, match="price"):
        Pricing(0.0)
    with pytest.raises(ValueError, match="GPU count"):
        Pricing(1.0, 0)
    with pytest.raises(ValueError, match="--gpu-price-per-hour"):
        Pricing.from_options(None, 2)
    assert Pricing.from_options(None, None) is None
    assert Pricing.from_options(3.0, None) == Pricing(3.0, 1)


def drive(search: MaxSearch, passes, limit: int = 40) -> list[tuple[float, bool]]:
    """Run the search against a pass/fail oracle; returns the trials in order."""
    for _ in range(limit):
        step = search.next()
        if step is None:
            return [(t.value, t.confirmation) for t in search.trials]
        search.record(step.value, passes(step.value, step.confirmation), step.confirmation)
    raise AssertionError(f"search did not end: {search.trials}")


def test_search_grows_then_bisects_then_confirms():
    search = MaxSearch(start=1.0, tolerance=0.1)
    trials = drive(search, lambda v, _c: v <= 7.3)
    values = [v for v, _ in trials]
    assert values[:4] == [1.0, 2.0, 4.0, 8.0]
    assert trials[-1][1] is True  # ends with a confirmation
    best = search.result
    assert best is not None and best <= 7.3
    assert 7.3 - best <= 0.1 * best + 1e-9
    assert search.lowest_fail is not None and search.lowest_fail - best <= 0.1 * best


def test_search_starting_too_high_halves_down():
    search = MaxSearch(start=100.0, tolerance=0.05)
    drive(search, lambda v, _c: v <= 3.0)
    assert [t.value for t in search.trials][:6] == [100.0, 50.0, 25.0, 12.5, 6.25, 3.125]
    assert search.result is not None and 3.0 / 1.05 <= search.result <= 3.0


def test_search_failed_confirmation_goes_on_below():
    """The load passes the short trial but not the longer confirmation at 8: the
    search must settle below it and confirm again."""
    search = MaxSearch(start=1.0, tolerance=0.1)
    drive(search, lambda v, confirm: v < 8 if confirm else v <= 8.5)
    confirmations = [t for t in search.trials if t.confirmation]
    assert len(confirmations) >= 2 and not confirmations[0].passed
    assert search.result is not None and search.result < 8


def test_integer_search_ends_on_adjacent_values():
    search = MaxSearch(start=1.0, integer=True, tolerance=0.01)
    drive(search, lambda v, _c: v <= 13)
    assert search.result == 13
    assert search.lowest_fail == 14
    assert all(t.value == int(t.value) for t in search.trials)


def test_search_with_nothing_passing_has_no_result():
    search = MaxSearch(start=4.0, integer=True)
    drive(search, lambda v, _c: False)
    assert search.result is None
    assert [t.value for t in search.trials] == [4.0, 2.0, 1.0]


def test_search_stops_at_the_ceiling():
    search = MaxSearch(start=1.0, ceiling=5.0)
    drive(search, lambda v, _c: True)
    assert search.result == 5.0
    assert max(t.value for t in search.trials) == 5.0


def test_search_rejects_bad_settings():
    with pytest.raises(ValueError, match="start"):
        MaxSearch(start=0)
    with pytest.raises(ValueError, match="tolerance"):
        MaxSearch(start=1, tolerance=1.5)
    with pytest.raises(ValueError, match="ceiling"):
        MaxSearch(start=1, floor=4, ceiling=2)


def test_knee_of_a_hockey_stick():
    rates = [1, 2, 4, 6, 8, 10]
    p99 = [100, 102, 105, 110, 1500, 3000]
    assert knee_index(rates, p99) == 3  # the last rate before latency turns steep


def test_no_knee_on_a_straight_line_or_too_few_points():
    assert knee_index([1, 2, 3, 4], [10, 20, 30, 40]) is None
    assert knee_index([1, 2], [10, 500]) is None
    with pytest.raises(ValueError):
        knee_index([1, 2, 3], [1, 2])


def judged(name: str, verdict: str, margin_pct: float | None) -> SloEntry:
    metric, stat = name.split()[:2]
    return SloEntry(
        name=name,
        metric=metric,
        stat=stat,
        kind="max",
        threshold=1.0,
        value=None,
        verdict=verdict,
        margin_pct=margin_pct,
    )


def test_limiting_slo_is_the_deepest_failure():
    slo = [
        judged("ttft_ms p99 <= 2000", "fail", -40.0),
        judged("tpot_ms p99 <= 100", "fail", -5.0),
        judged("error_rate rate <= 0.01", "pass", 80.0),
    ]
    assert limiting_slo(slo).name == "ttft_ms p99 <= 2000"
    assert limiting_slo([judged("ttft_ms p99 <= 1", "inconclusive", None)]) is not None
    assert limiting_slo([judged("ttft_ms p99 <= 1", "pass", 1.0)]) is None


def plan(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = plan_command(parser.parse_args(list(argv)))
    return code, out.getvalue(), err.getvalue()


def test_plan_command_reproduces_the_worked_example(tmp_path):
    code, text, _ = plan("--worked-example", "--out", str(tmp_path))
    assert code == 0
    assert "llama-2-7b@l4:fp16" in text
    assert "batch of 4 x 4,096 tokens: KV 8.59 GB = 2 x 4 x 32 x 4096 x 4096 x 2 bytes" in text
    assert "with the weights 22.07 GB: does NOT fit" in text
    saved = json.loads((tmp_path / "plan.json").read_text())
    assert saved["batch_kv_bytes"] == 8_589_934_592
    assert (
        saved["max_concurrent_sequences"]
        == kv_plan(load_profile("llama-2-7b@l4:fp16"), 4096).max_concurrent_sequences
    )
    assert (tmp_path / "contexts.csv").read_text().startswith("context_tokens,")


def test_plan_command_cost_at_the_simulated_throughput():
    code, text, _ = plan(
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--gpus",
        "2",
        "--context",
        "2048",
        "--gpu-price-per-hour",
        "3",
        "--json",
    )
    assert code == 0
    p = json.loads(text)
    assert p["profile"] == "llama-3.1-8b@2xh100:bf16" and p["gpus"] == 2
    est, cost = p["estimate"], p["cost"]
    assert est["output_tokens_per_s"] > 0 and cost["price_per_hour"] == 6.0
    per_hour_tokens = est["output_tokens_per_s"] * 3600
    assert cost["per_million_output_tokens"] == pytest.approx(6.0 / per_hour_tokens * 1e6)


def test_plan_command_rejects_an_impossible_deployment():
    code, _, err = plan("--model", "llama-3.1-70b", "--gpu", "h100")
    assert code == 2 and "use more GPUs" in err
    code, _, err = plan("--model", "llama-3.1-8b")
    assert code == 2 and "--gpu" in err


@pytest.mark.parametrize("command", ["run", "plan", "sweep", "experiment"])
def test_every_command_refuses_a_price_that_is_not_positive(command, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        main([command, "--gpu-price-per-hour", "-2"])
    assert stopped.value.code == 2
    assert "--gpu-price-per-hour: expected a number > 0, got '-2'" in capsys.readouterr().err


def test_plan_request_names_the_profile_and_the_worked_example_fills_only_gaps():
    request = PlanRequest(model="llama-3.1-8b", gpu="h100", gpus=2, dtype="fp8", kv_dtype="fp8")
    assert request_profile(request).name == load_profile("llama-3.1-8b@2xh100:fp8:kv=fp8").name
    example = PlanRequest(gpu="h100", batch=8).worked_example()
    assert (example.model, example.gpu, example.dtype, example.batch, example.context) == (
        "llama-2-7b",
        "h100",
        "fp16",
        8,
        4096,
    )
    with pytest.raises(ProfileError, match="--set 'x': expected KEY=VALUE"):
        request_profile(PlanRequest(profile="llama-3.1-8b@h100", settings=("x",)))
