"""Speculative decoding end to end on the simulated engine: a run's acceptance
from the replies and from the engine's counters, per request in
requests.jsonl, gated by an SLO; and the speculative experiment, whose
crossover must be the one the engine's model predicts."""

from __future__ import annotations

import csv
import json

import pytest
from loadruns import scenario_file, slogate, summary

from slogate.simengine.profiles import load_profile
from slogate.simengine.simulate import simulate_closed_loop

pytestmark = pytest.mark.slow

SPEC = "llama-3.1-8b@h100:speculative_tokens=3:acceptance_rate=0.7"
# A compute-poor deployment drafting many tokens: speculation pays alone and
# stops paying within a few users (the model's crossover lies between 4 and 16).
CROSSING = "llama-3.1-8b@a100:int4:speculative_tokens=7:acceptance_rate=0.8"
LOADS = (1, 4, 16)
INPUT, OUTPUT = 128, 64


def test_a_run_measures_acceptance_per_request_and_gates_on_it(tmp_path):
    """An acceptance SLO above what the engine reaches fails the run (exit 1)
    with the value the replies gave; the engine's counters over the window
    agree with it, and each request's line has its own counts."""
    out = tmp_path / "out"
    scenario = scenario_file(
        tmp_path,
        "chat-turns",
        workload={"input_tokens": 256, "turns": 1, "think_time_s": 0},
        slo={"spec_acceptance_rate": {"min": 0.95}},
    )
    done = slogate(
        "run", str(scenario), "--profile", SPEC, "--users", "4", "--duration", "8s",
        "--save-requests", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    s = summary(out)
    block = s["scenarios"]["chat-turns"]
    replies = block["speculation"]
    assert replies["requests"] == block["requests"]["ok"] > 4
    (slo,) = [e for e in block["slo"] if e["metric"] == "spec_acceptance_rate"]
    assert slo["verdict"] == "fail" and slo["value"] == pytest.approx(replies["acceptance_rate"])
    # 0.7 per position until the first miss: 0.7 (1 - 0.7^3) / (3 (1 - 0.7)) = 0.51 alone,
    # less with four drafting side by side
    assert 0.3 < replies["acceptance_rate"] < 0.55
    engine = s["speculation"]
    assert engine["draft_tokens"] >= replies["draft_tokens"]  # it also drafted the cut-off ones
    assert engine["acceptance_rate"] == pytest.approx(replies["acceptance_rate"], abs=0.05)
    assert 1.0 < engine["mean_accepted_length"] < 4.0
    assert engine["per_position"] == sorted(engine["per_position"], reverse=True)
    assert engine["windows"] and all(w["acceptance_rate"] for w in engine["windows"])
    lines = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    done_lines = [line for line in lines if line["ok"] and not line["warmup"]]
    assert sum(line["draft_tokens"] for line in done_lines) == replies["draft_tokens"]
    assert sum(line["accepted_tokens"] for line in done_lines) == replies["accepted_tokens"]
    with (out / "timeseries.csv").open() as rows:
        windows = [r["spec_acceptance_rate"] for r in csv.DictReader(rows)]
    assert windows and all(0 < float(rate) < 1 for rate in windows if rate)
    assert any(windows)
    assert "spec_acceptance_rate" in (out / "junit.xml").read_text()
    page = (out / "report.html").read_text()
    assert 'id="speculation-1"' in page and "Speculative acceptance per window" in page
    assert "speculative acceptance" in (out / "summary.md").read_text()


def model_speedups() -> list[tuple[int, float]]:
    """TPOT without / with speculation at each load, from the offline
    simulator: the engine's own model, on a virtual clock."""

    def tpot(profile: str, users: int) -> float:
        result = simulate_closed_loop(
            load_profile(profile), concurrency=users, input_tokens=INPUT, output_tokens=OUTPUT
        )
        return result.tpot_mean_s

    return [(n, tpot(f"{CROSSING}:speculative_tokens=0", n) / tpot(CROSSING, n)) for n in LOADS]


def test_the_speculative_experiment_finds_the_models_crossover(tmp_path):
    predicted = model_speedups()
    below = [n for n, ratio in predicted if ratio < 1]
    assert predicted[0][1] > 1 and below, predicted  # the model crosses within LOADS
    out = tmp_path / "exp"
    done = slogate(
        "experiment", "speculative", "--values", ",".join(map(str, LOADS)),
        "--profile", CROSSING, "--input-tokens", str(INPUT), "--output-tokens", str(OUTPUT),
        "--duration", "3s", "--out", str(out),
        timeout=400,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    doc = json.loads((out / "experiment.json").read_text())
    measured = doc["speculation"]["speedups"]
    assert [x for x, _ in measured] == list(LOADS)
    for (n, model), (_, seen) in zip(predicted, measured, strict=True):
        assert seen == pytest.approx(model, rel=0.3), (n, model, seen)
    crossing = doc["speculation"]["crossover"]
    assert crossing["between"] == [LOADS[LOADS.index(below[0]) - 1], below[0]]
    assert crossing["between"][0] < crossing["users"] < crossing["between"][1]
    assert doc["trends"][-1]["holds"]
    page = (out / "report.html").read_text()
    assert "TPOT by load, with and without speculation" in page
    assert "speedup by load" in page and page.count("<svg") == 3
