"""The client's TTFT and ITL against the embedded engine's own log, whole runs
(BENCHMARKS.md, "Client TTFT against the embedded engine's own, per API").

    .venv/bin/python bench/bench_engine_agreement.py [--apis chat responses messages] \
        [--duration 40s]

Runs ``scenarios/chat.yaml`` (32 users) once per API, the copy changing only
``api`` and ``name``, against the embedded engine with no warm-up, and prints
summary.json's ``engine_latency``: the client's mean TTFT and ITL beside the
engine's histograms over the same window. Target: client minus engine within
1 ms for both (exit 1 otherwise). Take it on a quiet machine: a process
preempted between the engine's clock and its write, or between the kernel's
stamp and the client's read, moves the difference by what the machine's other
work took.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BOUND_MS = 1.0


def one(api: str, duration: str, folder: Path) -> dict:
    data = yaml.safe_load((ROOT / "scenarios" / "chat.yaml").read_text())
    data.update(api=api, name=f"chat-{api}")
    scenario = folder / f"chat-{api}.yaml"
    scenario.write_text(yaml.safe_dump(data))
    out = folder / api
    command = [sys.executable, "-m", "slogate.cli", "run", str(scenario), "--duration", duration,
               "--warmup", "0s", "--out", str(out)]  # fmt: skip
    before = os.getloadavg()[0]
    subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    summary = json.loads((out / "summary.json").read_text())
    latency = summary["engine_latency"]
    return {
        "api": api,
        "verdict": summary["verdict"],
        "ttft": latency["ttft_ms"],
        "itl": latency["itl_ms"],
        "cancelled_at_stop": summary["run"]["cancelled_at_stop"],
        "load_average": [round(before, 2), round(os.getloadavg()[0], 2)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--apis", nargs="+", default=["chat", "responses", "messages"])
    parser.add_argument("--duration", default="40s")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-agreement-") as tmp:
        for api in args.apis:
            row = one(api, args.duration, Path(tmp))
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("| API | TTFT client / engine mean ms | requests client / engine | difference ms "
          "| ITL difference ms | load average |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for r in rows:
        t, i = r["ttft"], r["itl"]
        print(
            f"| {r['api']} | {t['client_mean']:.2f} / {t['mean']:.2f} | {t['client_count']} / "
            f"{t['count']} | {t['client_minus_engine']:+.2f} | {i['client_minus_engine']:+.3f} "
            f"| {r['load_average'][0]} to {r['load_average'][1]} |"
        )
    within = all(
        abs(r[m]["client_minus_engine"]) <= BOUND_MS for r in rows for m in ("ttft", "itl")
    )
    sys.exit(0 if within else 1)


if __name__ == "__main__":
    main()
