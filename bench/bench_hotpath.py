"""The client's hot path: output events per CPU-second with full measurement,
and the memory of a whole 1,024-stream run (BENCHMARKS.md).

    .venv/bin/python bench/bench_hotpath.py cpu [--streams 64] [--repeats 3]
    .venv/bin/python bench/bench_hotpath.py memory [--users 1024] [--durations 20 60]

cpu: the real client (``selftest``: SSE parse, JSON, per-token ITL, chunk
gaps, every HDR histogram) against the exact-schedule server at a true ITL of
1 ms, 256 tokens a request, client pinned to CPU 0 and server to CPU 1; events
per CPU-second of the client process. Target: 150,000 (exit 1 below it).

memory: ``slogate run`` with ``--users`` closed-loop streams (TTFT 50 ms, ITL
20 ms, 128 tokens, as ``slogate selftest``) against the exact-schedule server,
once per duration, ``--processes auto`` as a user gets it; the RSS and PSS of
the run's whole process tree (the command, Locust's master or local runner,
its workers) sampled every 0.5 s. PSS counts pages shared between the
processes once. Target: peak under 250 MB and no growth with run length
(exit 1 otherwise).

Both print one JSON line per run, then a Markdown table; the machine's load
average is in every line (the development machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_client import run_one

ROOT = Path(__file__).resolve().parent.parent
EVENTS_PER_CPU_S_TARGET = 150_000
TREE_MB_TARGET = 250.0
GROWTH_ALLOWED = 1.10
SCENARIO = ROOT / "tests" / "data" / "exact-chat.yaml"


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def cpu(args: argparse.Namespace) -> bool:
    rates = []
    for _ in range(args.repeats):
        before = load_average()
        r = run_one(args.streams, args.duration, 5, 1.0, 256, pin=True)
        rate = r["events"] / r["client_cpu_s"]
        rates.append(rate)
        line = {
            "streams": args.streams,
            "events": r["events"],
            "events_per_s": r["events_per_s"],
            "client_cpu_s": r["client_cpu_s"],
            "events_per_cpu_s": round(rate),
            "us_per_event": round(1e6 / rate, 2),
            "itl_p99_error_ms": next(
                c["error_ms"]
                for c in r["comparisons"]
                if (c["metric"], c["stat"]) == ("itl", "p99")
            ),
            "load_average": [before, load_average()],
        }
        print(json.dumps(line), flush=True)
    median = statistics.median(rates)
    print(f"events per CPU-second, median of {len(rates)}: {median:,.0f}", end=" ")
    print(f"({1e6 / median:.2f} us per event)")
    return median >= EVENTS_PER_CPU_S_TARGET


def tree_memory(root: psutil.Process) -> tuple[float, float, int]:
    """RSS and PSS (MB) of ``root`` and all its descendants, and how many."""
    rss = pss = 0
    processes = [root, *root.children(recursive=True)]
    for p in processes:
        try:
            info = p.memory_full_info()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rss += info.rss
        pss += info.pss
    return rss / 2**20, pss / 2**20, len(processes)


def one_memory_run(users: int, duration: float, engine_url: str, out: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "slogate.cli", "run", str(SCENARIO), "--host", engine_url]
    command += ["--users", str(users), "--spawn-rate", str(users), "--duration", f"{duration:g}"]
    command += ["--out", str(out)]
    before = load_average()
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    root = psutil.Process(child.pid)
    samples = []
    while child.poll() is None:
        samples.append(tree_memory(root))
        time.sleep(0.5)
    output = child.stdout.read().decode(errors="replace")
    summary = json.loads((out / "summary.json").read_text())
    generator = summary["generator"]
    scenario = next(iter(summary["scenarios"].values()))
    return {
        "users": users,
        "duration_s": duration,
        "requests": scenario["requests"]["ok"],
        "processes": generator["processes"],
        "processes_reason": generator.get("processes_reason"),
        "per_process": generator.get("per_process"),
        "peak_rss_mb": round(max(s[0] for s in samples), 1),
        "peak_pss_mb": round(max(s[1] for s in samples), 1),
        "end_pss_mb": round(samples[-1][1], 1) if samples else None,
        "most_processes": max(s[2] for s in samples),
        "verdict": summary["verdict"],
        "exit_code": child.returncode,
        "load_average": [before, load_average()],
        "tail": output.strip().splitlines()[-1:],
    }


def memory(args: argparse.Namespace) -> bool:
    from slogate.engines.exact import ExactEngine

    runs = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-hotpath-") as tmp,
        ExactEngine({"ttft_ms": 50, "itl_ms": 20}) as engine,
    ):
        for duration in args.durations:
            run = one_memory_run(args.users, duration, engine.url, Path(tmp) / f"run{duration:g}")
            print(json.dumps(run), flush=True)
            runs.append(run)
    print("| duration s | requests | processes | peak RSS sum MB | peak PSS MB | load average |")
    print("|---|---|---|---|---|---|")
    for r in runs:
        print(
            f"| {r['duration_s']:g} | {r['requests']} | {r['processes']} | {r['peak_rss_mb']} "
            f"| {r['peak_pss_mb']} | {r['load_average'][0]} to {r['load_average'][1]} |"
        )
    peaks = [r["peak_pss_mb"] for r in runs]
    return max(peaks) < TREE_MB_TARGET and peaks[-1] <= peaks[0] * GROWTH_ALLOWED


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cpu_parser = sub.add_parser("cpu")
    cpu_parser.add_argument("--streams", type=int, default=64)
    cpu_parser.add_argument("--duration", type=float, default=6.0)
    cpu_parser.add_argument("--repeats", type=int, default=3)
    memory_parser = sub.add_parser("memory")
    memory_parser.add_argument("--users", type=int, default=1024)
    memory_parser.add_argument("--durations", type=float, nargs="+", default=[20.0, 60.0])
    args = parser.parse_args()
    met = cpu(args) if args.command == "cpu" else memory(args)
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
