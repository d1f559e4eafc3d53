"""Saturation detection on the simulated engine, repeated (BENCHMARKS.md,
"Saturation detection at twice and half the capacity").

    .venv/bin/python bench/bench_saturation.py [--runs 10] [--duration 60s]

The engine serves one request at a time (``llama-3.1-8b@h100``,
``max_num_seqs=1``, 32 tokens in, 64 out): its capacity is 1 / a lone request's
time, measured first. Then ``--runs`` open-loop (Poisson) runs at half the
capacity with ``--saturation monitor``, and ``--runs`` at twice the capacity
with ``--saturation stop``. Targets: no half-capacity run flagged; every
twice-capacity run stopped past saturation within 60 s, exit 3 (exit 1 if
either misses). Prints one JSON line per run and a closing line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

from slogate.engines.simulated import start_engine

ROOT = Path(__file__).resolve().parent.parent
OUTPUT_TOKENS = 64
WITHIN_S = 60.0


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def capacity_rps(url: str) -> float:
    """1 / the fastest of three lone requests (non-streamed: the whole answer)."""
    with urllib.request.urlopen(f"{url}/v1/models", timeout=10) as response:
        model = json.loads(response.read())["data"][0]["id"]
    body = {"model": model, "messages": [{"role": "user", "content": "saturation " * 24}],
            "max_tokens": OUTPUT_TOKENS, "ignore_eos": True}  # fmt: skip
    times = []
    for _ in range(3):
        start = time.perf_counter()
        answer = post(f"{url}/v1/chat/completions", body)
        assert answer["usage"]["completion_tokens"] == OUTPUT_TOKENS
        times.append(time.perf_counter() - start)
    return 1.0 / min(times)


def one(url: str, rps: float, duration: str, mode: str, folder: Path) -> dict:
    scenario = folder / "open.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "open", "api": "chat", "model": "auto",
        "workload": {"kind": "chat", "text": "prose", "input_tokens": 32,
                     "output_tokens": OUTPUT_TOKENS, "turns": 1},
        "load": {"rate": {"rps": round(rps, 3), "arrival": "poisson"}, "duration": duration,
                 "max_in_flight": 4096},
        "request": {"ignore_eos": True},
        "slo": {"ttft_ms": {"p50": 600000}},
    }))  # fmt: skip
    out = folder / "out"
    command = [sys.executable, "-m", "slogate.cli", "run", str(scenario), "--host", url,
               "--out", str(out), "--saturation", mode]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    summary = json.loads((out / "summary.json").read_text())
    found = summary["run"]["saturation"]["found"]
    return {"rps": round(rps, 3), "mode": mode, "exit": done.returncode,
            "found_at_s": None if found is None else found["at_s"],
            "measured_s": summary["run"]["measured_s"]}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--duration", default="60s", help="of each half-capacity run")
    args = parser.parse_args()
    with start_engine("llama-3.1-8b@h100", max_num_seqs=1) as engine:
        capacity = capacity_rps(engine.url)
        print(json.dumps({"capacity_rps": round(capacity, 3)}), flush=True)
        half, double = [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                half.append(one(engine.url, capacity / 2, args.duration, "monitor", Path(folder)))
            print(json.dumps(half[-1]), flush=True)
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as folder:
                double.append(one(engine.url, capacity * 2, "120s", "stop", Path(folder)))
            print(json.dumps(double[-1]), flush=True)
    false_alarms = sum(r["found_at_s"] is not None for r in half)
    caught = [r["found_at_s"] for r in double if r["exit"] == 3 and r["found_at_s"] is not None]
    in_time = sum(at <= WITHIN_S for at in caught)
    print(
        f"half capacity: {false_alarms} of {len(half)} flagged; twice capacity: "
        f"{in_time} of {len(double)} stopped within {WITHIN_S:g} s "
        f"(found at {', '.join(f'{at:g}' for at in caught) or 'never'} s)"
    )
    return 0 if false_alarms == 0 and in_time == len(double) else 1


if __name__ == "__main__":
    sys.exit(main())
