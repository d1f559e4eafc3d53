"""Saturation detection on the simulated engine, repeated (BENCHMARKS.md,
"Saturation detection at twice and half the capacity").

    .venv/bin/python bench/bench_saturation.py [--runs 10] [--duration 60s]

The engine serves one request at a time (``llama-3.1-8b@h100``,
``max_num_seqs=1``, 32 tokens in, 64 out): its capacity is 1 / a lone request's
time, measured first. Then ``--runs`` open-loop (Poisson) runs at half the
capacity with ``--saturation monitor``, and ``--runs`` at twice the capacity
with ``--saturation stop``. Neither reaches the in-flight cap (4,096 there);
so ``--runs`` more go to an engine of ``CAPPED_SEQS`` sequences at three times
its capacity (``CAPPED_SEQS`` / a lone request's time, an upper bound: a
batch's steps are slower) under the default ``max_in_flight`` of 1,024, which
the queue reaches in about 15 s. Targets: no half-capacity run flagged; every
twice-capacity run stopped past saturation within 60 s, exit 3; every capped
run reached the cap, was stopped within 60 s, exit 3, counting the arrivals
held back, and no lag mostly held by the cap was blamed on the load generator
(exit 1 if any misses). Prints one JSON line per run and a closing line.
"""

from __future__ import annotations

import argparse
import csv
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
CAPPED_SEQS = 16
DEFAULT_CAP = 1024


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def capacity_rps(url: str, seqs: int = 1) -> float:
    """``seqs`` / the fastest of three lone requests (non-streamed: the whole answer)."""
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
    return seqs / min(times)


def one(url: str, rps: float, duration: str, mode: str, folder: Path, cap: int = 4096) -> dict:
    scenario = folder / "open.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "open", "api": "chat", "model": "auto",
        "workload": {"kind": "chat", "text": "prose", "input_tokens": 32,
                     "output_tokens": OUTPUT_TOKENS, "turns": 1},
        "load": {"rate": {"rps": round(rps, 3), "arrival": "poisson"}, "duration": duration,
                 "max_in_flight": cap},
        "request": {"ignore_eos": True},
        "slo": {"ttft_ms": {"p50": 600000}},
    }))  # fmt: skip
    out = folder / "out"
    command = [sys.executable, "-m", "slogate.cli", "run", str(scenario), "--host", url,
               "--out", str(out), "--saturation", mode]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    summary = json.loads((out / "summary.json").read_text())
    found = summary["run"]["saturation"]["found"]
    with (out / "timeseries.csv").open() as rows:
        in_flight = [int(r["in_flight"]) for r in csv.DictReader(rows) if r.get("in_flight")]
    blamed = [r for r in summary["invalid_reasons"] if r.startswith("load generator lag")]
    return {"rps": round(rps, 3), "mode": mode, "cap": cap, "exit": done.returncode,
            "found_at_s": None if found is None else found["at_s"],
            "held_back": None if found is None else found.get("held_back"),
            "max_in_flight_seen": max(in_flight, default=0),
            "generator_blamed": bool(blamed),
            "lag_cause_p99_ms": summary["generator"].get("lag_cause_p99_ms"),
            "loop_stall_p99_ms": summary["generator"].get("loop_stall_ms", {}).get("p99"),
            "measured_s": summary["run"]["measured_s"]}  # fmt: skip


def capped_runs(runs: int) -> list[dict]:
    """Three times an engine's capacity under the default in-flight cap."""
    capped = []
    with start_engine("llama-3.1-8b@h100", max_num_seqs=CAPPED_SEQS) as engine:
        capacity = capacity_rps(engine.url, CAPPED_SEQS)
        print(json.dumps({"capped_capacity_rps": round(capacity, 3)}), flush=True)
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as folder:
                capped.append(
                    one(engine.url, 3 * capacity, "120s", "stop", Path(folder), DEFAULT_CAP)
                )
            print(json.dumps(capped[-1]), flush=True)
    return capped


def misblamed(run: dict) -> bool:
    """The run's lag was mostly the cap's, yet it was called the generator's.
    A lag that was not (the requests that finished before the stop were sent
    before the cap filled; a busy machine's loop stalls can make those late)
    is the generator's, and the loop stalls' p99 printed beside it says so."""
    causes = run["lag_cause_p99_ms"] or {}
    return run["generator_blamed"] and next(iter(causes), None) == "in_flight_cap"


def capped_ok(run: dict) -> bool:
    """Reached the cap, stopped past saturation in time counting the held-back
    arrivals, and a lag the cap caused not called a generator fault."""
    return (
        run["exit"] == 3
        and run["max_in_flight_seen"] >= DEFAULT_CAP
        and run["found_at_s"] is not None
        and run["found_at_s"] <= WITHIN_S
        and bool(run["held_back"])
        and not misblamed(run)
    )


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
    capped = capped_runs(args.runs)
    false_alarms = sum(r["found_at_s"] is not None for r in half)
    caught = [r["found_at_s"] for r in double if r["exit"] == 3 and r["found_at_s"] is not None]
    in_time = sum(at <= WITHIN_S for at in caught)
    capped_in_time = sum(capped_ok(r) for r in capped)
    print(
        f"half capacity: {false_alarms} of {len(half)} flagged; twice capacity: "
        f"{in_time} of {len(double)} stopped within {WITHIN_S:g} s "
        f"(found at {', '.join(f'{at:g}' for at in caught) or 'never'} s); three times "
        f"capacity at the cap of {DEFAULT_CAP}: {capped_in_time} of {len(capped)} reached it "
        f"and stopped within {WITHIN_S:g} s, no lag of the cap's blamed on the generator "
        f"(found at {', '.join(str(r['found_at_s']) for r in capped)} s; the generator named "
        f"for its own lag in {sum(r['generator_blamed'] for r in capped)}, loop stalls p99 "
        f"{', '.join(str(r['loop_stall_p99_ms']) for r in capped)} ms)"
    )
    passed = false_alarms == 0 and in_time == len(double) and capped_in_time == len(capped)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
