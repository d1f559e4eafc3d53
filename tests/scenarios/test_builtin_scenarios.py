"""The built-in scenarios send what real traffic looks like: the Azure 2023
trace percentiles, reproduced by sampling the scenarios as a user would."""

from __future__ import annotations

import numpy as np
import pytest

from slogate import scenarios
from slogate.scenarios.traces import BUILTIN_TRACES, TraceColumns, load_trace

# Published reference points (Patel et al., Splitwise, ISCA 2024): p50, p90, p99
AZURE = {
    "conv": {"input": (1020, 2735, 4142), "output": (129, 424, 601)},
    "code": {"input": (1469, 5188, 7436), "output": (13, 55, 251)},
}
N = 10_000


def percentiles(values: list[int]) -> np.ndarray:
    return np.percentile(values, [50, 90, 99])


@pytest.mark.parametrize("kind", ["conv", "code"])
def test_bundled_traces_match_the_published_numbers(kind):
    trace = load_trace(BUILTIN_TRACES[f"azure-{kind}"], TraceColumns())
    assert np.allclose(percentiles(trace.input_tokens), AZURE[kind]["input"], rtol=0.01)
    assert np.allclose(percentiles(trace.output_tokens), AZURE[kind]["output"], rtol=0.01)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kind"), [("chat", "conv"), ("code", "code")])
def test_sampled_scenarios_reproduce_azure_within_10_percent(name, kind):
    rows = list(scenarios.sample_requests(scenarios.load(name), N))
    assert len(rows) == N
    got_in = percentiles([r["input_tokens"] for r in rows])
    got_out = percentiles([r["output_tokens"] for r in rows])
    assert np.allclose(got_in, AZURE[kind]["input"], rtol=0.10), got_in
    assert np.allclose(got_out, AZURE[kind]["output"], rtol=0.10), got_out


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kind"), [("azure-conv", "conv"), ("azure-code", "code")])
def test_trace_replays_send_the_trace(name, kind):
    [s] = scenarios.load(name)
    rows = list(scenarios.sample_requests([s], s.workload.trace.rows))
    got_in = percentiles([r["input_tokens"] for r in rows])
    assert np.allclose(got_in, AZURE[kind]["input"], rtol=0.02), got_in
    assert [r["output_tokens"] for r in rows] == list(s.workload.trace.output_tokens)


def test_chat_context_grows_with_the_turn():
    rows = list(scenarios.sample_requests(scenarios.load("chat"), 4000))
    by_turn = {}
    for r in rows:
        by_turn.setdefault(r["turn"], []).append(r["input_tokens"])
    medians = [np.median(by_turn[t]) for t in sorted(by_turn)]
    assert sorted(by_turn) == [0, 1, 2, 3]
    assert medians == sorted(medians) and medians[-1] > 2 * medians[0]


def test_rag_prompts_are_long_with_short_answers():
    rows = list(scenarios.sample_requests(scenarios.load("rag"), 1000))
    inputs = np.array([r["input_tokens"] for r in rows])
    outputs = np.array([r["output_tokens"] for r in rows])
    assert np.mean((inputs >= 2000) & (inputs <= 8000)) > 0.9
    assert np.median(outputs) < 200
    firsts = [r["prefix_id"].split(",")[0] for r in rows]
    assert 0.3 < 1 - len(set(firsts)) / len(firsts) < 0.95  # documents recur, not always


def test_builtin_demo_defaults_are_short_and_runnable():
    for name in ("chat", "rag", "code", "mixed", "azure-conv", "azure-code"):
        for s in scenarios.load(name):
            assert s.load.duration_s <= 90 and s.load.warmup_s < s.load.duration_s
            assert (s.load.users or 0) <= 32 and (s.load.rate is None or s.load.rate.rps <= 6)
            assert s.request.include_usage and s.request.ignore_eos
            limits = {(t.metric, t.stat): t.limit for t in s.slo.thresholds}
            assert limits[("ttft_ms", "p99")] <= 3000 and limits[("tpot_ms", "p99")] == 100
            assert limits[("error_rate", "rate")] == 0.01
