"""Runs on the simulated engine made to fail one way each, for the diagnosis and
the tunes that start from a diagnosed run (docs/simengine.md for the settings)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from loadruns import slogate, summary


@dataclass(frozen=True)
class Case:
    """A run made to fail one way: the engine's profile, the load, the
    lengths and the SLOs."""

    profile: str
    load: dict
    inputs: dict
    outputs: int
    slo: dict


CASES = {
    "interference": Case(
        "llama-3.1-8b@a100",
        {"users": 8, "spawn_rate": 8},
        {"dist": "uniform", "min": 100, "max": 8000},
        100,
        {"itl_ms": {"p99": 50}},
    ),
    "kv": Case(
        "llama-3.1-8b@h100:num_gpu_blocks=150",
        {"users": 12, "spawn_rate": 12},
        {"dist": "uniform", "min": 150, "max": 300},
        500,
        {"ttft_ms": {"p90": 500}, "e2e_ms": {"p90": 5000}},
    ),
    "rate": Case(
        "llama-3.1-8b@h100",
        {"rate": 30},
        {"dist": "uniform", "min": 1500, "max": 2500},
        10,
        {"ttft_ms": {"p95": 500}},
    ),
    "batch": Case(
        "llama-3.1-8b@h100:max_num_seqs=3",
        {"users": 12, "spawn_rate": 12},
        {"dist": "uniform", "min": 300, "max": 900},
        150,
        {"ttft_ms": {"p95": 200}},
    ),
    "passing": Case(
        "llama-3.1-8b@h100",
        {"users": 4, "spawn_rate": 4},
        {"dist": "uniform", "min": 300, "max": 900},
        50,
        {"ttft_ms": {"p50": 2000}, "itl_ms": {"p90": 500}},
    ),
}


def write_scenario(tmp_path: Path, case: Case) -> Path:
    """The case's scenario file: a chat of one turn, outputs of exactly
    ``case.outputs`` tokens, 15 s measured after 2 s of warm-up."""
    scenario = {
        "name": "diag",
        "api": "chat",
        "model": "auto",
        "workload": {
            "kind": "chat",
            "text": "prose",
            "input_tokens": case.inputs,
            "output_tokens": case.outputs,
            "turns": 1,
        },
        "load": {"duration": "15s", "warmup": "2s", **case.load},
        "request": {"ignore_eos": True},
        "slo": case.slo,
    }
    path = tmp_path / "diag.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def run(tmp_path: Path, case: Case) -> dict:
    """The case run on the simulated engine; its summary (the run in ``tmp_path/out``)."""
    path = write_scenario(tmp_path, case)
    out = tmp_path / "out"
    done = slogate("run", str(path), "--profile", case.profile, "--out", str(out))
    assert (out / "summary.json").is_file(), done.stderr[-3000:]
    return summary(out)
